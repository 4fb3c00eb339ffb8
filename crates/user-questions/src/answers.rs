//! Validation of an answer set received from outside (a wire client), with the rules of
//! upstream's web provider: one answer per question in order with matching ids, no duplicate
//! labels, a non-blank `custom` when present, at most one label and not both for single-select,
//! and every label one of the question's options.

use std::collections::HashSet;

use crate::Answers;
use crate::Question;

/// Why an answer set does not answer its questions (the client is told this text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswersError {
    #[error("expected {expected} answers, got {got}")]
    Count { expected: usize, got: usize },
    #[error("answer \"{answer}\" does not match question \"{question}\"")]
    WrongId { answer: String, question: String },
    #[error("duplicate label \"{label}\" for question \"{question}\"")]
    DuplicateLabel { label: String, question: String },
    #[error("\"{label}\" is not an option of question \"{question}\"")]
    NotAnOption { label: String, question: String },
    #[error("blank custom answer for question \"{0}\"")]
    BlankCustom(String),
    #[error("question \"{0}\" takes one choice or one custom answer")]
    SingleSelect(String),
}

/// `Ok` when `answers` is an acceptable reply to `questions`; otherwise why not.
pub fn validate_answers(questions: &[Question], answers: &Answers) -> Result<(), AnswersError> {
    if answers.answers.len() != questions.len() {
        return Err(AnswersError::Count {
            expected: questions.len(),
            got: answers.answers.len(),
        });
    }
    for (question, answer) in questions.iter().zip(&answers.answers) {
        if answer.id != question.id {
            return Err(AnswersError::WrongId {
                answer: answer.id.clone(),
                question: question.id.clone(),
            });
        }
        let mut seen = HashSet::new();
        for label in &answer.selected {
            if !seen.insert(label.as_str()) {
                return Err(AnswersError::DuplicateLabel {
                    label: label.clone(),
                    question: question.id.clone(),
                });
            }
            if !question.labels().any(|l| l == label) {
                return Err(AnswersError::NotAnOption {
                    label: label.clone(),
                    question: question.id.clone(),
                });
            }
        }
        if let Some(custom) = &answer.custom
            && custom.trim().is_empty()
        {
            return Err(AnswersError::BlankCustom(question.id.clone()));
        }
        if !question.is_multi_select()
            && (answer.selected.len() > 1
                || (answer.custom.is_some() && !answer.selected.is_empty()))
        {
            return Err(AnswersError::SingleSelect(question.id.clone()));
        }
    }
    Ok(())
}
