//! The UI as the user-questions provider (`ask_user_question`, the `exit_plan_mode` review):
//! each request becomes an inline question with its options, answered one question at a
//! time; a free-text row takes the editor's text as the custom answer.

use dsh_kernel::BoxFuture;
use dsh_tools::CancellationToken;
use dsh_user_questions::Answer;
use dsh_user_questions::Answers;
use dsh_user_questions::Question;
use dsh_user_questions::QuestionIntent;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestionError;
use dsh_user_questions::UserQuestionProvider;
use tokio::sync::mpsc;
use tokio::sync::oneshot;

/// The label of the free-text row under a question's options.
pub const TYPE_AN_ANSWER: &str = "type an answer (in the input box), then enter";

type Reply = oneshot::Sender<Result<Answers, UserQuestionError>>;

/// One request, as the UI holds it while the person answers.
#[derive(Debug)]
pub struct PendingQuestions {
    pub questions: Vec<Question>,
    /// The question being answered.
    pub index: usize,
    /// The highlighted row: an option, or (last) the free-text row.
    pub selected: usize,
    /// Multi-select: the options ticked so far (indexes).
    pub ticked: Vec<usize>,
    answers: Vec<Answer>,
    /// The asking call's token: once cancelled, the question is stale.
    pub signal: CancellationToken,
    reply: Option<Reply>,
}

/// What a key did to the front question.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Still answering (moved, ticked, or went on to the next question).
    Pending,
    /// Every question is answered; the reply went out.
    Answered,
    /// The key is not for the question (the editor takes it, or a hint is shown).
    Ignored,
}

impl PendingQuestions {
    /// A question with no one waiting (tests draw these).
    pub fn detached(questions: Vec<Question>) -> Self {
        Self::new(questions, CancellationToken::new(), None)
    }

    fn new(questions: Vec<Question>, signal: CancellationToken, reply: Option<Reply>) -> Self {
        Self {
            questions,
            index: 0,
            selected: 0,
            ticked: Vec::new(),
            answers: Vec::new(),
            signal,
            reply,
        }
    }

    pub fn current(&self) -> Option<&Question> {
        self.questions.get(self.index)
    }

    /// The rows of the current question: its option labels, then the free-text row.
    pub fn rows(&self) -> Vec<String> {
        let mut rows: Vec<String> = self
            .current()
            .map(|q| q.labels().map(str::to_owned).collect())
            .unwrap_or_default();
        rows.push(TYPE_AN_ANSWER.to_owned());
        rows
    }

    /// Whether the free-text row is highlighted (typing then goes to the editor).
    pub fn on_free_text(&self) -> bool {
        self.selected + 1 == self.rows().len()
    }

    /// Whether the current question is a plan review (drawn with its plan).
    pub fn is_plan_review(&self) -> bool {
        matches!(
            self.current().and_then(|q| q.intent.as_ref()),
            Some(QuestionIntent::PlanReview { .. })
        )
    }

    pub fn move_by(&mut self, delta: isize) {
        let n = self.rows().len() as isize;
        self.selected = (self.selected as isize + delta).rem_euclid(n) as usize;
    }

    /// Space on a multi-select option: tick or untick it.
    pub fn toggle(&mut self) -> Step {
        let multi = self.current().is_some_and(Question::is_multi_select);
        if !multi || self.on_free_text() {
            return Step::Ignored;
        }
        match self.ticked.iter().position(|&i| i == self.selected) {
            Some(at) => {
                self.ticked.remove(at);
            }
            None => self.ticked.push(self.selected),
        }
        Step::Pending
    }

    /// Enter: answers the current question with the highlighted row (single select), the
    /// ticked options (multi-select; the highlighted one when none is ticked), or `typed`
    /// on the free-text row. `None` when the free-text row is chosen with nothing typed.
    pub fn confirm(&mut self, typed: &str) -> Option<Step> {
        let question = self.current()?.clone();
        let labels: Vec<String> = question.labels().map(str::to_owned).collect();
        let answer = if self.on_free_text() {
            let typed = typed.trim();
            if typed.is_empty() {
                return None;
            }
            // Multi-select: ticked labels may go with the text; single: the text alone.
            let mut answer = Answer::custom(question.id.clone(), typed);
            if question.is_multi_select() {
                answer.selected = self.ticked_labels(&labels);
            }
            answer
        } else if question.is_multi_select() && !self.ticked.is_empty() {
            Answer::selected(question.id.clone(), self.ticked_labels(&labels))
        } else {
            let label = labels.get(self.selected)?.clone();
            Answer::selected(question.id.clone(), vec![label])
        };
        Some(self.push(answer))
    }

    /// A digit: picks option `n` (1-based) of a single-select question at once.
    pub fn pick(&mut self, n: usize) -> Step {
        let Some(question) = self.current() else {
            return Step::Ignored;
        };
        let Some(label) = question.labels().nth(n.wrapping_sub(1)).map(str::to_owned) else {
            return Step::Ignored;
        };
        if question.is_multi_select() {
            self.selected = n - 1;
            return self.toggle();
        }
        let id = question.id.clone();
        self.push(Answer::selected(id, vec![label]))
    }

    fn ticked_labels(&self, labels: &[String]) -> Vec<String> {
        let mut ticked = self.ticked.clone();
        ticked.sort_unstable();
        ticked
            .iter()
            .filter_map(|&i| labels.get(i).cloned())
            .collect()
    }

    fn push(&mut self, answer: Answer) -> Step {
        self.answers.push(answer);
        self.index += 1;
        self.selected = 0;
        self.ticked.clear();
        if self.index < self.questions.len() {
            return Step::Pending;
        }
        if let Some(reply) = self.reply.take() {
            // The asker may be gone (call cancelled); nothing left to tell.
            let _ = reply.send(Ok(Answers {
                answers: std::mem::take(&mut self.answers),
            }));
        }
        Step::Answered
    }

    /// Esc: the person dismissed the question (`the user cancelled ask_user_question`).
    pub fn dismiss(mut self) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(Err(UserQuestionError::cancelled()));
        }
    }
}

/// The provider the TUI registers with the user-questions service.
#[derive(Debug, Clone)]
pub struct TuiQuestions {
    tx: mpsc::UnboundedSender<PendingQuestions>,
}

impl TuiQuestions {
    /// The provider and the stream of questions the UI must show.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<PendingQuestions>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }
}

impl UserQuestionProvider for TuiQuestions {
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        let (reply, answer) = oneshot::channel();
        let signal = request.signal.clone();
        let pending = PendingQuestions::new(request.questions, signal.clone(), Some(reply));
        if self.tx.send(pending).is_err() {
            return Box::pin(std::future::ready(Err(UserQuestionError::new(
                dsh_user_questions::QuestionErrorCode::ProviderFailed,
                "the terminal UI is gone",
            ))));
        }
        Box::pin(async move {
            tokio::select! {
                answer = answer => answer.unwrap_or_else(|_| Err(UserQuestionError::aborted())),
                () = signal.cancelled() => Err(UserQuestionError::aborted()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use dsh_user_questions::QuestionOption;

    use super::*;

    fn question(id: &str, multi: bool) -> Question {
        let mut q = Question::new(id, format!("pick {id}"));
        q.options = Some(vec![
            QuestionOption::new("Fast (Recommended)", None),
            QuestionOption::new("Safe", Some("slower")),
        ]);
        q.multi_select = Some(multi);
        q
    }

    fn asked(
        questions: Vec<Question>,
    ) -> (
        PendingQuestions,
        oneshot::Receiver<Result<Answers, UserQuestionError>>,
    ) {
        let (reply, rx) = oneshot::channel();
        (
            PendingQuestions::new(questions, CancellationToken::new(), Some(reply)),
            rx,
        )
    }

    #[test]
    fn answers_each_question_in_turn_with_options_ticks_and_text() {
        let (mut pending, mut rx) = asked(vec![
            question("a", false),
            question("b", true),
            question("c", false),
        ]);
        pending.move_by(1);
        assert_eq!(pending.confirm(""), Some(Step::Pending));
        assert_eq!(pending.toggle(), Step::Pending);
        pending.move_by(1);
        assert_eq!(pending.toggle(), Step::Pending);
        assert_eq!(pending.confirm(""), Some(Step::Pending));
        pending.move_by(-1);
        assert!(pending.on_free_text());
        assert_eq!(pending.confirm("  "), None, "nothing typed");
        assert_eq!(pending.confirm(" my own "), Some(Step::Answered));
        let answers = rx.try_recv().unwrap().unwrap();
        assert_eq!(
            answers.to_json(),
            r#"{"answers":[{"id":"a","selected":["Safe"]},{"id":"b","selected":["Fast (Recommended)","Safe"]},{"id":"c","selected":[],"custom":"my own"}]}"#
        );
        let questions = [
            question("a", false),
            question("b", true),
            question("c", false),
        ];
        assert!(dsh_user_questions::validate_answers(&questions, &answers).is_ok());
    }

    #[test]
    fn a_digit_picks_and_esc_cancels() {
        let (mut pending, mut rx) = asked(vec![question("a", false)]);
        assert_eq!(pending.pick(9), Step::Ignored);
        assert_eq!(pending.pick(2), Step::Answered);
        assert_eq!(
            rx.try_recv().unwrap().unwrap().answers[0].selected,
            ["Safe"]
        );
        let (pending, mut rx) = asked(vec![question("a", false)]);
        pending.dismiss();
        let error = rx.try_recv().unwrap().unwrap_err();
        assert_eq!(error.message, "the user cancelled ask_user_question");
    }
}
