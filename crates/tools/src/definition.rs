//! Tool definitions and the typed authoring builder (upstream `defineTool`).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::panic::catch_unwind;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::ToolSchema;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::card::ToolCallView;
use crate::card::ToolResultView;
use crate::error::DefineError;
use crate::error::ToolError;
use crate::execution::Execution;
use crate::execution::ToolRun;
use crate::result::ResultView;
use crate::result::ToolResult;

/// What the erased body yields: a candidate value, or why there is none.
pub(crate) enum BodyFailure {
    /// The body (or argument validation) failed: becomes `Error: <message>`.
    Thrown(ToolError),
    /// The returned value could not be turned into JSON: `INVALID_TOOL_OUTPUT`.
    Snapshot(SnapshotError),
}

/// Why a body's return value has no JSON form (`value snapshot failed: <this>`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnapshotError {
    #[error(transparent)]
    Serialize(#[from] serde_json::Error),
    #[error("value has an unexpected type")]
    UnexpectedType,
}

pub(crate) type BodyFn = Arc<
    dyn Fn(Arc<Value>, ToolRun) -> BoxFuture<'static, Result<Value, BodyFailure>> + Send + Sync,
>;
pub(crate) type RenderFn =
    Arc<dyn Fn(&Value, &Value) -> Result<Vec<ContentBlock>, ToolError> + Send + Sync>;
pub(crate) type MetaFn = Arc<dyn Fn(&Value, &Value) -> Result<Value, ToolError> + Send + Sync>;
/// `finalize_content(exec, result)`: replacement content, or `None` to keep it.
pub type FinalizeFn = Arc<
    dyn Fn(&Execution, &ToolResult) -> Result<Option<Vec<ContentBlock>>, ToolError> + Send + Sync,
>;
type ClassifierFn = Arc<dyn Fn(&Value) -> bool + Send + Sync>;
type PresentCallFn = Arc<dyn Fn(&Value) -> Option<ToolCallView> + Send + Sync>;
type PresentResultFn = Arc<dyn Fn(&Value, &ResultView) -> Option<ToolResultView> + Send + Sync>;

/// A registered tool: the model-facing schema plus everything the pipeline runs. Built only by
/// [`ToolBuilder::build`], immutable afterwards; the registry borrows it as `Arc`.
pub struct ToolDefinition {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    /// Whether arguments are validated against `parameters` before the body (typed and DSL
    /// tools); raw (MCP) tools validate their own input.
    pub(crate) validated: bool,
    pub(crate) output_schema: Value,
    pub(crate) render: RenderFn,
    pub(crate) presentation_meta: Option<MetaFn>,
    pub(crate) body: BodyFn,
    pub(crate) finalize_content: Option<FinalizeFn>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) concurrency_safe: Option<ClassifierFn>,
    pub(crate) present_call: Option<PresentCallFn>,
    pub(crate) present_result: Option<PresentResultFn>,
}

impl ToolDefinition {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The model-facing JSON Schema of the arguments.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }
    /// Whether the harness validates arguments before the body.
    pub fn validates_arguments(&self) -> bool {
        self.validated
    }
    pub fn output_schema(&self) -> &Value {
        &self.output_schema
    }
    /// Declarative only: the registry never enforces it (a timeout wrapper does).
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms
    }
    pub fn has_presentation_meta(&self) -> bool {
        self.presentation_meta.is_some()
    }
    pub fn has_finalize_content(&self) -> bool {
        self.finalize_content.is_some()
    }
    pub fn has_concurrency_classifier(&self) -> bool {
        self.concurrency_safe.is_some()
    }
    pub fn has_present_call(&self) -> bool {
        self.present_call.is_some()
    }
    pub fn has_present_result(&self) -> bool {
        self.present_result.is_some()
    }

    /// Violations of `arguments` against the parameters (empty for raw tools: never checked).
    pub fn validate_arguments(&self, arguments: &Value) -> Vec<String> {
        if self.validated {
            dsh_schema::validate(&self.parameters, arguments, "")
        } else {
            Vec::new()
        }
    }

    /// The three model-facing keys; `parameters` is a detached deep copy.
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: dsh_schema::clone_deep(&self.parameters),
        }
    }

    /// The pending card, or `None` (fallback) when there is no presenter, the arguments do not
    /// fit, or the presenter panics. Never fails.
    pub fn present_call(&self, arguments: &Value) -> Option<ToolCallView> {
        let presenter = self.present_call.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| presenter(arguments)))
            .ok()
            .flatten()
    }

    /// The completed card, or `None` (fallback). Never fails.
    pub fn present_result(&self, arguments: &Value, result: &ResultView) -> Option<ToolResultView> {
        let presenter = self.present_result.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| presenter(arguments, result)))
            .ok()
            .flatten()
    }

    /// The raw classifier verdict: `true` only when the classifier exists, does not panic and
    /// says exactly `true` (invalid arguments of a validated tool say `false`).
    pub fn is_concurrency_safe(&self, arguments: &Value) -> bool {
        let Some(classifier) = self.concurrency_safe.as_ref() else {
            return false;
        };
        catch_unwind(AssertUnwindSafe(|| classifier(arguments))).unwrap_or(false)
    }
}

impl Drop for ToolDefinition {
    // serde_json's own Drop recurses; schemas may be thousands of levels deep.
    fn drop(&mut self) {
        dsh_schema::drop_deep(std::mem::take(&mut self.parameters));
        dsh_schema::drop_deep(std::mem::take(&mut self.output_schema));
    }
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("validated", &self.validated)
            .field("output_schema", &self.output_schema)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

/// Entry point of the authoring API: `Tool::builder("read")`.
pub struct Tool;

impl Tool {
    /// A builder for a tool whose arguments are untyped JSON until [`ToolBuilder::params`].
    pub fn builder(name: impl Into<String>) -> ToolBuilder<Value> {
        ToolBuilder {
            name: name.into(),
            description: String::new(),
            parameters: Ok(serde_json::json!({"type": "object", "properties": {}})),
            validated: true,
            output: None,
            presentation_meta: None,
            body: None,
            finalize_content: None,
            timeout_ms: None,
            concurrency_safe: None,
            present_call: None,
            present_result: None,
            _args: PhantomData,
        }
    }
}

type TypedClassifier<A> = Arc<dyn Fn(&A) -> bool + Send + Sync>;
type TypedPresentCall<A> = Arc<dyn Fn(&A) -> Option<ToolCallView> + Send + Sync>;
type TypedPresentResult<A> = Arc<dyn Fn(&A, &ResultView) -> Option<ToolResultView> + Send + Sync>;
type TypedBody<A> =
    Arc<dyn Fn(A, ToolRun) -> BoxFuture<'static, Result<Value, BodyFailure>> + Send + Sync>;

/// Builds a [`ToolDefinition`]. `A` is the argument type the body and presenters receive,
/// deserialised from the frozen, validated arguments. Call `params`/`raw_parameters`/
/// `author_parameters` first: they reset the typed callbacks.
pub struct ToolBuilder<A> {
    name: String,
    description: String,
    parameters: Result<Value, DefineError>,
    validated: bool,
    output: Option<Result<(Value, RenderFn), DefineError>>,
    presentation_meta: Option<MetaFn>,
    body: Option<TypedBody<A>>,
    finalize_content: Option<FinalizeFn>,
    timeout_ms: Option<u64>,
    concurrency_safe: Option<TypedClassifier<A>>,
    present_call: Option<TypedPresentCall<A>>,
    present_result: Option<TypedPresentResult<A>>,
    _args: PhantomData<fn() -> A>,
}

impl<A: DeserializeOwned + Send + 'static> ToolBuilder<A> {
    /// What the model reads about the tool.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    fn retype<B>(self, parameters: Result<Value, DefineError>, validated: bool) -> ToolBuilder<B> {
        ToolBuilder {
            name: self.name,
            description: self.description,
            parameters,
            validated,
            output: self.output,
            presentation_meta: self.presentation_meta,
            body: None,
            finalize_content: self.finalize_content,
            timeout_ms: self.timeout_ms,
            concurrency_safe: None,
            present_call: None,
            present_result: None,
            _args: PhantomData,
        }
    }

    /// Typed parameters: the schema is derived from `T` (schemars, normalised to the supported
    /// subset) and arguments are validated before the body.
    pub fn params<T: schemars::JsonSchema + DeserializeOwned + Send + 'static>(
        self,
    ) -> ToolBuilder<T> {
        let schema = dsh_schema::parameters_for::<T>().map_err(DefineError::from);
        self.retype(schema, true)
    }

    /// Upstream's author DSL (`{path: {type:'string', required:true}}`), compiled and validated.
    pub fn author_parameters(self, spec: &Value) -> ToolBuilder<Value> {
        let schema = dsh_schema::compile_parameters(spec).map_err(DefineError::from);
        self.retype(schema, true)
    }

    /// A hand-written subset schema (asserted at build) that the harness DOES validate.
    pub fn validated_parameters(self, schema: Value) -> ToolBuilder<Value> {
        let checked = dsh_schema::assert_supported(&schema)
            .map(|()| schema)
            .map_err(DefineError::from);
        self.retype(checked, true)
    }

    /// A raw JSON Schema (MCP and dynamic tools). The harness does NOT validate these
    /// arguments: the body receives them unchanged and owns its input checks.
    pub fn raw_parameters(self, schema: Value) -> ToolBuilder<Value> {
        self.retype(Ok(schema), false)
    }

    /// The output declaration with a schema derived from `O`; `render(args, value)` makes the
    /// model-facing content from the validated value.
    pub fn output<O>(
        mut self,
        render: impl Fn(&Value, &O) -> Result<Vec<ContentBlock>, ToolError> + Send + Sync + 'static,
    ) -> Self
    where
        O: schemars::JsonSchema + DeserializeOwned + 'static,
    {
        let erased: RenderFn = Arc::new(move |args: &Value, value: &Value| {
            let typed = O::deserialize(value).map_err(|e| ToolError::new(e.to_string()))?;
            render(args, &typed)
        });
        self.output = Some(
            dsh_schema::value_schema_for::<O>()
                .map_err(DefineError::from)
                .map(|schema| (schema, erased)),
        );
        self
    }

    /// The output declaration with a raw subset schema (asserted at build).
    pub fn raw_output<R>(mut self, schema: Value, render: R) -> Self
    where
        R: Fn(&Value, &Value) -> Result<Vec<ContentBlock>, ToolError> + Send + Sync + 'static,
    {
        let checked = dsh_schema::assert_supported(&schema)
            .map(|()| schema)
            .map_err(DefineError::from);
        self.output = Some(checked.map(|schema| (schema, Arc::new(render) as RenderFn)));
        self
    }

    /// The output declaration in upstream's author DSL (`{type:'json'}`, …).
    pub fn author_output<R>(mut self, spec: &Value, render: R) -> Self
    where
        R: Fn(&Value, &Value) -> Result<Vec<ContentBlock>, ToolError> + Send + Sync + 'static,
    {
        let compiled = dsh_schema::compile_value(spec).map_err(DefineError::from);
        self.output = Some(compiled.map(|schema| (schema, Arc::new(render) as RenderFn)));
        self
    }

    /// Replayable card metadata from `(args, value)`; computed for top-level calls only.
    pub fn presentation_meta<M>(mut self, project: M) -> Self
    where
        M: Fn(&Value, &Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    {
        self.presentation_meta = Some(Arc::new(project));
        self
    }

    /// The pending card (pure; soft-validated: bad arguments give the generic fallback).
    pub fn present_call<P>(mut self, present: P) -> Self
    where
        P: Fn(&A) -> Option<ToolCallView> + Send + Sync + 'static,
    {
        self.present_call = Some(Arc::new(present));
        self
    }

    /// The completed card (pure; soft-validated).
    pub fn present_result<P>(mut self, present: P) -> Self
    where
        P: Fn(&A, &ResultView) -> Option<ToolResultView> + Send + Sync + 'static,
    {
        self.present_result = Some(Arc::new(present));
        self
    }

    /// Input-sensitive scheduling: `true` lets the call overlap other safe calls.
    pub fn concurrency_safe<C>(mut self, classify: C) -> Self
    where
        C: Fn(&A) -> bool + Send + Sync + 'static,
    {
        self.concurrency_safe = Some(Arc::new(classify));
        self
    }

    /// Declarative deadline (must be positive); enforced by a timeout wrapper, not the registry.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Rewrites the final content of every outcome of this tool (runs once per call).
    pub fn finalize_content<F>(mut self, finalize: F) -> Self
    where
        F: Fn(&Execution, &ToolResult) -> Result<Option<Vec<ContentBlock>>, ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.finalize_content = Some(Arc::new(finalize));
        self
    }

    /// The body: typed arguments plus the run context, returning the canonical value.
    pub fn run<F, Fut, R>(mut self, body: F) -> Self
    where
        F: Fn(A, ToolRun) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
        R: Serialize + 'static,
    {
        self.body = Some(Arc::new(move |args: A, run: ToolRun| {
            let fut = body(args, run);
            Box::pin(async move {
                match fut.await {
                    Ok(value) => into_value(value).map_err(BodyFailure::Snapshot),
                    Err(error) => Err(BodyFailure::Thrown(error)),
                }
            })
        }));
        self
    }

    /// Validates the declaration and freezes it into a definition.
    pub fn build(self) -> Result<ToolDefinition, DefineError> {
        let name = self.name;
        if self.timeout_ms == Some(0) {
            return Err(DefineError::InvalidTimeout { name });
        }
        let parameters = self.parameters?;
        let (output_schema, render) = match self.output {
            None => return Err(DefineError::MissingOutput { name }),
            Some(output) => output?,
        };
        let Some(body) = self.body else {
            return Err(DefineError::MissingBody { name });
        };
        let params = Arc::new(DeepValue(dsh_schema::clone_deep(&parameters)));
        let validated = self.validated;
        let fit = move |args: &Value| -> Result<A, ToolError> {
            if validated {
                let violations = dsh_schema::validate(&params.0, args, "");
                if !violations.is_empty() {
                    return Err(ToolError::invalid_args(&violations));
                }
            }
            if std::any::TypeId::of::<A>() == std::any::TypeId::of::<Value>() {
                // Iterative copy: untyped bodies may receive arbitrarily deep arguments.
                let boxed: Box<dyn Any> = Box::new(dsh_schema::clone_deep(args));
                if let Ok(typed) = boxed.downcast::<A>() {
                    return Ok(*typed);
                }
            }
            // A serde failure after schema validation is still the caller's argument problem.
            A::deserialize(args).map_err(|e| ToolError::invalid_args(&[e.to_string()]))
        };
        let fit = Arc::new(fit);
        let body_fit = fit.clone();
        let body: BodyFn = Arc::new(
            move |args: Arc<Value>, run: ToolRun| match body_fit(&args) {
                Ok(typed) => body(typed, run),
                Err(error) => Box::pin(std::future::ready(Err(BodyFailure::Thrown(error)))),
            },
        );
        let concurrency_safe = self.concurrency_safe.map(|classify| {
            let fit = fit.clone();
            Arc::new(move |args: &Value| fit(args).is_ok_and(|typed| classify(&typed)))
                as ClassifierFn
        });
        let present_call = self.present_call.map(|present| {
            let fit = fit.clone();
            Arc::new(move |args: &Value| fit(args).ok().and_then(|typed| present(&typed)))
                as PresentCallFn
        });
        let present_result = self.present_result.map(|present| {
            let fit = fit.clone();
            Arc::new(move |args: &Value, result: &ResultView| {
                fit(args).ok().and_then(|typed| present(&typed, result))
            }) as PresentResultFn
        });
        Ok(ToolDefinition {
            name,
            description: self.description,
            parameters,
            validated,
            output_schema,
            render,
            presentation_meta: self.presentation_meta,
            body,
            finalize_content: self.finalize_content,
            timeout_ms: self.timeout_ms,
            concurrency_safe,
            present_call,
            present_result,
        })
    }
}

/// A JSON value dropped without recursion (schemas may be thousands of levels deep).
struct DeepValue(Value);

impl Drop for DeepValue {
    fn drop(&mut self) {
        dsh_schema::drop_deep(std::mem::take(&mut self.0));
    }
}

/// The body's return as JSON, without a serialise round trip when it already is a `Value`.
fn into_value<R: Serialize + 'static>(value: R) -> Result<Value, SnapshotError> {
    let boxed: Box<dyn Any> = Box::new(value);
    match boxed.downcast::<Value>() {
        Ok(value) => Ok(*value),
        Err(other) => match other.downcast::<R>() {
            Ok(typed) => Ok(serde_json::to_value(&*typed)?),
            Err(_) => Err(SnapshotError::UnexpectedType),
        },
    }
}

#[cfg(test)]
#[path = "definition_tests.rs"]
mod tests;
