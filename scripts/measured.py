"""Shared by the whole-process benchmark scripts: a Popen that keeps its child's rusage."""

import os
import subprocess


class Measured(subprocess.Popen):
    """A Popen that keeps the child's rusage from wait4() (reaped children included)."""

    rusage = None

    def _try_wait(self, wait_flags):
        try:
            pid, sts, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            pid, sts = self.pid, 0
            usage = None
        if pid == self.pid:
            self.rusage = usage
        return pid, sts
