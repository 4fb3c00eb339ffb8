//! `dsh-attachments`: the local attachment store.
//!
//! Owns: image bytes kept content-addressed under one directory (`$DSH_HOME/attachments/`,
//! files `sha256-<64 hex>`, written atomically with mode 0600), the store-side admission of an
//! image (format sniffing, the record matching its bytes, size and pixel limits), and reading
//! an attachment back with its hash verified. It implements the two seams that need it:
//! [`dsh_tools::AttachmentStore`] (tools save what they produce) and
//! [`dsh_llm::AttachmentResolver`] (the model adapter loads what it sends).
//! Does not own: when an image may be used (model route checks live with the callers), the
//! image block's wire shape (`dsh_tools::ImageAttachment`).
//! [`AttachmentsPlugin`] (`[plugins.attachments]`) provides the store to the other plugins.
//! Must not depend on: concrete tools, the host, a front-end.

mod error;
mod plugin;
mod store;

pub use error::AttachmentError;
pub use plugin::AttachmentSettings;
pub use plugin::AttachmentsPlugin;
pub use store::ACCEPTED_MEDIA_TYPES;
pub use store::AttachmentLimits;
pub use store::LocalAttachmentStore;
pub use store::attachment_id;
