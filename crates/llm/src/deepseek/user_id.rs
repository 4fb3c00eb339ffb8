//! The anonymous installation id sent as `x-deepseek-harness-user-id`.

use std::io;
use std::path::Path;

const FILE_NAME: &str = ".anonymous-user-id";

/// The id kept in `<dsh_home>/.anonymous-user-id`, created (with a fresh UUID v4) on first use.
/// A file whose content is not a usable header value is replaced.
pub fn anonymous_user_id(dsh_home: &Path) -> io::Result<String> {
    let path = dsh_home.join(FILE_NAME);
    match std::fs::read_to_string(&path) {
        Ok(content) => {
            let id = content.trim();
            if !id.is_empty() && id.bytes().all(|b| (0x21..=0x7E).contains(&b)) {
                return Ok(id.to_owned());
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    std::fs::create_dir_all(dsh_home)?;
    let id = uuid::Uuid::new_v4().to_string();
    std::fs::write(&path, format!("{id}\n"))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_reused() {
        let home = tempfile::tempdir().unwrap();
        let nested = home.path().join("dsh");
        let id = anonymous_user_id(&nested).unwrap();
        assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 4);
        assert_eq!(anonymous_user_id(&nested).unwrap(), id);
        std::fs::write(nested.join(FILE_NAME), "  \n").unwrap();
        let replaced = anonymous_user_id(&nested).unwrap();
        assert_ne!(replaced, id);
        assert_eq!(
            std::fs::read_to_string(nested.join(FILE_NAME))
                .unwrap()
                .trim(),
            replaced
        );
    }
}
