// The Ralph loop: one fresh structured-output worker per round toward a fixed objective.
const { objective, maxRounds, maxHandoffChars } = args;
const reportSchema = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["continue", "complete", "blocked"] },
    summary: { type: "string" },
    evidence: { type: "array", items: { type: "string" } },
    nextSteps: { type: "array", items: { type: "string" } },
    blocker: { type: "string" },
  },
  required: ["status", "summary", "evidence", "nextSteps", "blocker"],
  additionalProperties: false,
};
function checkReport(report, round) {
  if (report === null || typeof report !== "object" || Array.isArray(report)) {
    throw new Error("Ralph round " + round + " report is not an object");
  }
  if (!["continue", "complete", "blocked"].includes(report.status)) {
    throw new Error("Ralph round " + round + " report has an invalid status");
  }
  const handoff = JSON.stringify(report);
  if (handoff.length > maxHandoffChars) {
    throw new Error("Ralph round " + round + " report is " + handoff.length + " characters, over the handoff limit of " + maxHandoffChars);
  }
}
let previous = null;
for (let round = 1; round <= maxRounds; round++) {
  const prompt = [
    "You are a fresh worker in a Ralph loop. Earlier rounds were done by other workers; you see none of their conversations, only the handoff below.",
    "Objective:\n" + objective,
    "Ralph round: " + round + " of " + maxRounds + ".",
    "The workspace is the memory of this loop: inspect it to learn what earlier rounds did, make concrete progress on the objective, and leave your work in the workspace for the next round.",
    "Previous handoff:\n" + (previous === null ? "(none — this is the first round)" : JSON.stringify(previous)),
    "Finish by calling structured_output exactly once. status: \"complete\" when the objective is met, \"blocked\" when you cannot proceed (say why in blocker), \"continue\" otherwise. summary: what you did; evidence: files, commands or results that show it; nextSteps: what the next round should do; blocker: an empty string unless blocked.",
  ].join("\n\n");
  const report = await agent(prompt, { label: "Ralph round " + round, phase: "Fresh-agent rounds", schema: reportSchema });
  if (report === null) {
    return { status: "round-failed", roundsStarted: round, lastReport: previous };
  }
  checkReport(report, round);
  if (report.status === "complete" || report.status === "blocked") {
    return { status: report.status, roundsStarted: round, report };
  }
  previous = report;
}
return { status: "budget-limited", roundsStarted: maxRounds, report: previous };
