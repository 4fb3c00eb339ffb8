//! A server's prompts as slash commands: `/mcp__<server>__<prompt> [arguments]` fetches the
//! prompt (`prompts/get`) and sends its messages to the agent as the user's next prompt.

use dsh_commands::CommandCall;
use dsh_commands::CommandRegistry;
use dsh_commands::CommandResult;
use dsh_commands::CommandSpec;
use rmcp::model::Prompt;
use serde_json::Map;
use serde_json::Value;

use crate::McpServer;
use crate::ServerState;

/// The prompt's arguments from a command line: `name=value` words, or, for a prompt that
/// takes arguments, the whole text as its first one. Missing required arguments are an error.
pub fn prompt_arguments(prompt: &Prompt, raw: &str) -> Result<Map<String, Value>, String> {
    let declared = prompt.arguments.as_deref().unwrap_or_default();
    let mut arguments = Map::new();
    let text = raw.trim();
    let named: Vec<(&str, &str)> = text
        .split_whitespace()
        .filter_map(|word| word.split_once('='))
        .filter(|(name, _)| declared.iter().any(|a| a.name == *name))
        .collect();
    if !named.is_empty() {
        for (name, value) in named {
            arguments.insert(name.to_owned(), Value::String(value.to_owned()));
        }
    } else if let Some(first) = declared.first().filter(|_| !text.is_empty()) {
        arguments.insert(first.name.clone(), Value::String(text.to_owned()));
    }
    let missing: Vec<&str> = declared
        .iter()
        .filter(|a| a.required == Some(true) && !arguments.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "prompt {} needs {} (write name=value)",
            prompt.name,
            missing.join(", ")
        ));
    }
    Ok(arguments)
}

fn hint(prompt: &Prompt) -> Option<String> {
    let declared = prompt.arguments.as_deref().unwrap_or_default();
    (!declared.is_empty()).then(|| {
        declared
            .iter()
            .map(|a| {
                if a.required == Some(true) {
                    format!("{}=…", a.name)
                } else {
                    format!("[{}=…]", a.name)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    })
}

fn spec(server: &McpServer, prompt: Prompt) -> CommandSpec {
    let name = crate::prompt_command(server.name(), &prompt.name);
    let description = prompt
        .description
        .clone()
        .or_else(|| prompt.title.clone())
        .unwrap_or_else(|| format!("Prompt {} of MCP server {}", prompt.name, server.name()));
    let hint = hint(&prompt);
    let server = server.clone();
    let handler = move |call: CommandCall| {
        let (server, prompt) = (server.clone(), prompt.clone());
        async move {
            let arguments = match prompt_arguments(&prompt, call.argument()) {
                Ok(arguments) => arguments,
                Err(text) => return Ok(CommandResult::error(text)),
            };
            let messages = match server.get_prompt(&prompt.name, arguments).await {
                Ok(messages) if !messages.is_empty() => messages,
                Ok(_) => {
                    return Ok(CommandResult::error(format!(
                        "prompt {} of MCP server {} returned no text",
                        prompt.name,
                        server.name()
                    )));
                }
                Err(text) => return Ok(CommandResult::error(text)),
            };
            let message = dsh_protocol::Message::user(
                vec![dsh_protocol::ContentBlock::text(messages.join("\n\n"))],
                dsh_protocol::MessageSource::user(),
            );
            call.agent.followup(message).map_err(|e| e.to_string())?;
            Ok(CommandResult::ok())
        }
    };
    let spec = CommandSpec::new(name, description, handler);
    match hint {
        Some(hint) => spec.input(hint),
        None => spec,
    }
}

/// Waits until `server` is connected; false when it never will be (gave up, closed).
async fn connected(server: &McpServer) -> bool {
    let mut watch = server.watch();
    loop {
        match watch.borrow_and_update().state {
            ServerState::Connected => return true,
            ServerState::Disabled | ServerState::Failed { .. } | ServerState::Closed => {
                return false;
            }
            ServerState::Connecting | ServerState::Reconnecting { .. } => {}
        }
        if watch.changed().await.is_err() {
            return false;
        }
    }
}

/// The commands of one prompt listing, owned by a child of the server's scope.
struct Installed {
    scope: dsh_kernel::Scope,
    listing: String,
}

/// Replaces the registered prompt commands with `prompts` (unless the listing is the one
/// already registered, so an unchanged re-list leaves the registry alone).
fn install(
    registry: &CommandRegistry,
    server: &McpServer,
    prompts: Vec<Prompt>,
    installed: &mut Option<Installed>,
) {
    let listing = serde_json::to_string(&prompts).unwrap_or_default();
    if installed.as_ref().is_some_and(|i| i.listing == listing) {
        return;
    }
    if let Some(old) = installed.take() {
        old.scope.dispose();
    }
    let scope = match server.scope().child(
        dsh_kernel::ScopeKind::Plugin,
        format!("mcp:{}:prompts", server.name()),
    ) {
        Ok(scope) => scope,
        // The server is being unmounted.
        Err(error) => {
            tracing::debug!(server = server.name(), %error, "no prompt commands");
            return;
        }
    };
    for prompt in prompts {
        let name = crate::prompt_command(server.name(), &prompt.name);
        if !dsh_commands::is_valid_name(&name) {
            tracing::debug!(server = server.name(), %name, "prompt name is not a command name");
            continue;
        }
        if let Err(error) = registry.register(&scope, spec(server, prompt)) {
            tracing::warn!(server = server.name(), %name, %error, "cannot register prompt command");
        }
    }
    *installed = Some(Installed { scope, listing });
}

/// Keeps one command per prompt `server` lists, owned by the server's scope (so they go when
/// the server is unmounted): listed once connected, and again after every reconnect and every
/// `notifications/prompts/list_changed`. During an outage the commands stay (like the tools);
/// they go when the server gives up. Names that are not valid command names are skipped.
pub fn register_prompt_commands(
    registry: &CommandRegistry,
    server: &McpServer,
) -> tokio::task::JoinHandle<()> {
    let (registry, server) = (registry.clone(), server.clone());
    tokio::spawn(async move {
        let mut changes = server.prompt_changes();
        let mut installed: Option<Installed> = None;
        loop {
            if !connected(&server).await {
                if let Some(old) = installed.take() {
                    old.scope.dispose();
                }
                return;
            }
            changes.borrow_and_update();
            match server.prompts().await {
                Ok(prompts) => install(&registry, &server, prompts, &mut installed),
                // A failed re-list keeps the commands there are.
                Err(error) => {
                    tracing::debug!(server = server.name(), %error, "prompts/list failed")
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() {
                    return;
                },
                () = ended(&server) => {}
            }
        }
    })
}

/// Resolves once `server` is closed or gave up (the loop then takes its commands away).
async fn ended(server: &McpServer) {
    let mut watch = server.watch();
    let _ = watch
        .wait_for(|s| matches!(s.state, ServerState::Failed { .. } | ServerState::Closed))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::PromptArgument;

    fn prompt() -> Prompt {
        let mut prompt = Prompt::new("args-prompt", Some("With arguments"), None);
        let mut city = PromptArgument::new("city");
        city.required = Some(true);
        prompt.arguments = Some(vec![city, PromptArgument::new("state")]);
        prompt
    }

    #[test]
    fn arguments_by_name_or_the_whole_text_for_the_first() {
        let p = prompt();
        let named = prompt_arguments(&p, "city=Paris state=TX").unwrap();
        assert_eq!(named["city"], "Paris");
        assert_eq!(named["state"], "TX");
        let whole = prompt_arguments(&p, " New York ").unwrap();
        assert_eq!(whole["city"], "New York");
        assert_eq!(
            prompt_arguments(&p, "").unwrap_err(),
            "prompt args-prompt needs city (write name=value)"
        );
        assert_eq!(hint(&p).as_deref(), Some("city=… [state=…]"));
    }
}
