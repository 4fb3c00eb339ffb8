//! Live output of a running call: a best-effort side channel to front-ends.
//!
//! What a tool streams here is display only. It never reaches the model, the result or the
//! session log, so a sink that drops everything is always correct.

use dsh_kernel::Scope;

use crate::execution::ToolRun;

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Receives the raw output of running calls, as a kernel service on (or above) the calling
/// agent's scope.
///
/// Best-effort and non-blocking: the tool calls [`ToolOutputSink::output`] inline on its read
/// loop, so an implementation must return at once and never fail the call. Copy the chunk into
/// a bounded buffer or channel and drop (or coalesce) on overflow; never wait on a consumer.
/// Chunks of one stream arrive in order; those of different streams interleave as read.
pub trait ToolOutputSink: Send + Sync {
    fn output(&self, call_id: &str, stream: OutputStream, chunk: &[u8]);
}

/// The sink visible from `scope`, if a front-end provided one.
pub fn output_sink_in(scope: &Scope) -> Option<std::sync::Arc<dyn ToolOutputSink>> {
    scope.service::<dyn ToolOutputSink>()
}

/// The sink for a call: looked up from the calling agent's scope (none without an agent).
pub fn output_sink(run: &ToolRun) -> Option<std::sync::Arc<dyn ToolOutputSink>> {
    run.agent().and_then(|agent| output_sink_in(agent.scope()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::Mutex;

    use dsh_kernel::ScopeKind;

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, OutputStream, Vec<u8>)>>);

    impl ToolOutputSink for Recorder {
        fn output(&self, call_id: &str, stream: OutputStream, chunk: &[u8]) {
            if let Ok(mut seen) = self.0.lock() {
                seen.push((call_id.to_owned(), stream, chunk.to_vec()));
            }
        }
    }

    #[test]
    fn a_sink_provided_on_an_agent_is_found_from_inside_it_only() {
        let root = Scope::root();
        let agent = root.child(ScopeKind::Agent, "a").unwrap();
        let inner = agent.child(ScopeKind::Plugin, "p").unwrap();
        let other = root.child(ScopeKind::Agent, "b").unwrap();
        assert!(output_sink_in(&agent).is_none());
        let recorder = Arc::new(Recorder::default());
        let provided = agent
            .provide::<dyn ToolOutputSink>(recorder.clone())
            .unwrap();
        let sink = output_sink_in(&inner).expect("visible below the agent");
        sink.output("c1", OutputStream::Stderr, b"x");
        assert!(output_sink_in(&other).is_none());
        assert_eq!(
            recorder.0.lock().unwrap().as_slice(),
            &[("c1".to_owned(), OutputStream::Stderr, b"x".to_vec())]
        );
        provided.dispose();
        assert!(output_sink_in(&agent).is_none());
    }
}
