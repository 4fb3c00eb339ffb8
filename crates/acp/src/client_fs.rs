//! The client's editor as the file tools' reader and writer (ACP `fs/read_text_file`,
//! `fs/write_text_file`), provided on each owned agent's scope when the client offers them.
//! The tools have applied their file policy before they get here.

use std::path::PathBuf;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ReadTextFileRequest;
use agent_client_protocol::v1::schema::WriteTextFileRequest;
use dsh_kernel::BoxFuture;
use dsh_tools::ClientRequestError;
use dsh_tools::EditorFiles;

/// What `clientCapabilities.fs` offered at `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FsCapabilities {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

impl FsCapabilities {
    pub(crate) fn any(self) -> bool {
        self.read || self.write
    }
}

pub(crate) struct ClientFiles {
    pub(crate) session_id: String,
    pub(crate) connection: ConnectionTo<Client>,
    pub(crate) capabilities: FsCapabilities,
}

impl EditorFiles for ClientFiles {
    fn can_read(&self) -> bool {
        self.capabilities.read
    }

    fn can_write(&self) -> bool {
        self.capabilities.write
    }

    fn read_text(&self, path: PathBuf) -> BoxFuture<'static, Result<String, ClientRequestError>> {
        let sent = self
            .connection
            .send_request(ReadTextFileRequest::new(self.session_id.clone(), path));
        Box::pin(async move {
            sent.block_task()
                .await
                .map(|response| response.content)
                .map_err(|error| ClientRequestError::Refused(error.to_string()))
        })
    }

    fn write_text(
        &self,
        path: PathBuf,
        content: String,
    ) -> BoxFuture<'static, Result<(), ClientRequestError>> {
        let sent = self.connection.send_request(WriteTextFileRequest::new(
            self.session_id.clone(),
            path,
            content,
        ));
        Box::pin(async move {
            sent.block_task()
                .await
                .map(drop)
                .map_err(|error| ClientRequestError::Refused(error.to_string()))
        })
    }
}
