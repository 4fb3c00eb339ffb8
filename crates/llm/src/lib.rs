//! `dsh-llm`: the model seam of dsh.
//!
//! Owns: the [`ModelAdapter`] trait the agent loop talks to, [`ModelRequest`], the
//! [`BlockAssembler`] (the single fold of stream chunks into content blocks), the provider
//! [`RetryPolicy`] decisions, the provider registry ([`PROVIDERS`], [`build_adapter`]), the
//! DeepSeek chat-completions adapter (request body, SSE parsing, chunk translation, error
//! mapping, idle watchdog) and a generic OpenAI-compatible one ([`OpenAiCompatibleAdapter`]).
//! Does not own: the message/stream vocabulary (that is `dsh-protocol`, re-exported here), when
//! to retry or how to log it (the agent loop), the session log.
//! Must not depend on: `dsh-session`, `dsh-tools`, `dsh-agent`. The loop never sees wire JSON.

mod adapter;
mod assembler;
mod deepseek;
mod error;
mod http;
pub mod openai;
mod providers;
mod retry;
pub mod wire;

pub use adapter::ChunkStream;
pub use adapter::ModelAdapter;
pub use adapter::ModelInfo;
pub use adapter::ModelRequest;
pub use adapter::RequestPurpose;
pub use assembler::BlockAssembler;
pub use deepseek::AttachmentResolver;
pub use deepseek::DEFAULT_BASE_URL;
pub use deepseek::DEFAULT_MODEL;
pub use deepseek::DeepSeekAdapter;
pub use deepseek::DeepSeekConfig;
pub use deepseek::ImageData;
pub use deepseek::ModelEntry;
pub use deepseek::PROVIDER;
pub use deepseek::Thinking;
pub use deepseek::USER_AGENT;
pub use deepseek::anonymous_user_id;
pub use deepseek::chat_request_body;
pub use deepseek::chat_request_body_with;
pub use error::ImageLoadError;
pub use error::LlmError;
pub use error::codes;
pub use openai::OpenAiCompatibleAdapter;
pub use openai::OpenAiConfig;
pub use providers::EnvLookup;
pub use providers::PROVIDERS;
pub use providers::Provider;
pub use providers::ProviderSettings;
pub use providers::apply_catalog;
pub use providers::build_adapter;
pub use providers::provider;
pub use retry::RetryPolicy;
pub use tokio_util::sync::CancellationToken;

pub use dsh_protocol::ContentBlock;
pub use dsh_protocol::FinishReason;
pub use dsh_protocol::LlmFailure;
pub use dsh_protocol::Message;
pub use dsh_protocol::MessageList;
pub use dsh_protocol::Role;
pub use dsh_protocol::StreamChunk;
pub use dsh_protocol::TokenUsage;
pub use dsh_protocol::ToolSchema;
