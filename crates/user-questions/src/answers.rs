//! Validation of an answer set received from outside (a wire client), with the rules of
//! upstream's web provider: one answer per question in order with matching ids, no duplicate
//! labels, a non-blank `custom` when present, at most one label and not both for single-select,
//! and every label one of the question's options.

use std::collections::HashSet;

use crate::Answers;
use crate::Question;

/// `Ok` when `answers` is an acceptable reply to `questions`; otherwise why not.
pub fn validate_answers(questions: &[Question], answers: &Answers) -> Result<(), String> {
    if answers.answers.len() != questions.len() {
        return Err(format!(
            "expected {} answers, got {}",
            questions.len(),
            answers.answers.len()
        ));
    }
    for (question, answer) in questions.iter().zip(&answers.answers) {
        if answer.id != question.id {
            return Err(format!(
                "answer \"{}\" does not match question \"{}\"",
                answer.id, question.id
            ));
        }
        let mut seen = HashSet::new();
        for label in &answer.selected {
            if !seen.insert(label.as_str()) {
                return Err(format!(
                    "duplicate label \"{label}\" for question \"{}\"",
                    question.id
                ));
            }
            if !question.labels().any(|l| l == label) {
                return Err(format!(
                    "\"{label}\" is not an option of question \"{}\"",
                    question.id
                ));
            }
        }
        if let Some(custom) = &answer.custom
            && custom.trim().is_empty()
        {
            return Err(format!(
                "blank custom answer for question \"{}\"",
                question.id
            ));
        }
        if !question.is_multi_select()
            && (answer.selected.len() > 1
                || (answer.custom.is_some() && !answer.selected.is_empty()))
        {
            return Err(format!(
                "question \"{}\" takes one choice or one custom answer",
                question.id
            ));
        }
    }
    Ok(())
}
