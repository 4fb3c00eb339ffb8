//! Session log export (§11.4): a session's raw JSONL plus its descendants', as one ZIP archive
//! (stored entries, so the logs inside stay byte-identical and any unzip tool reads them).

use std::io::Write;

use crate::service::QueryError;
use crate::service::SessionQuery;

/// CRC-32 (IEEE), as ZIP requires.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

fn u16le(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn u32le(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A minimal ZIP writer (method 0, no data descriptors); entries must be under 4 GiB.
pub fn zip(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>, QueryError> {
    let too_big = || {
        QueryError::new(
            "SESSION_QUERY_PERSISTENCE_FAILED",
            "session log is too large to export",
        )
    };
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let offset = u32::try_from(out.len()).map_err(|_| too_big())?;
        let size = u32::try_from(data.len()).map_err(|_| too_big())?;
        let name_len = u16::try_from(name.len()).map_err(|_| too_big())?;
        let crc = crc32(data);
        u32le(&mut out, 0x0403_4b50);
        for v in [20u16, 0x0800, 0, 0, 0x21] {
            u16le(&mut out, v);
        }
        for v in [crc, size, size] {
            u32le(&mut out, v);
        }
        u16le(&mut out, name_len);
        u16le(&mut out, 0);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        u32le(&mut central, 0x0201_4b50);
        for v in [20u16, 20, 0x0800, 0, 0, 0x21] {
            u16le(&mut central, v);
        }
        for v in [crc, size, size] {
            u32le(&mut central, v);
        }
        for v in [name_len, 0, 0, 0, 0] {
            u16le(&mut central, v);
        }
        u32le(&mut central, 0o100_644 << 16);
        u32le(&mut central, offset);
        central.extend_from_slice(name.as_bytes());
    }
    let count = u16::try_from(entries.len()).map_err(|_| too_big())?;
    let central_offset = u32::try_from(out.len()).map_err(|_| too_big())?;
    let central_size = u32::try_from(central.len()).map_err(|_| too_big())?;
    out.extend_from_slice(&central);
    u32le(&mut out, 0x0605_4b50);
    for v in [0u16, 0, count, count] {
        u16le(&mut out, v);
    }
    u32le(&mut out, central_size);
    u32le(&mut out, central_offset);
    u16le(&mut out, 0);
    Ok(out)
}

/// The ZIP of session `id` and its descendants (`<id>.jsonl` each, root first).
pub fn export_session(query: &SessionQuery, id: &str) -> Result<Vec<u8>, QueryError> {
    let all = query.list_sessions();
    let root = all.iter().find(|r| r.id == id).ok_or_else(|| {
        QueryError::new("SESSION_QUERY_SESSION_NOT_FOUND", "session was not found")
    })?;
    let mut order = vec![root.clone()];
    let mut i = 0;
    while i < order.len() {
        let parent = order[i].id.clone();
        let mut children: Vec<_> = all
            .iter()
            .filter(|r| {
                r.parent.as_deref() == Some(parent.as_str()) && !order.iter().any(|o| o.id == r.id)
            })
            .cloned()
            .collect();
        children.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        order.extend(children);
        i += 1;
    }
    let mut entries = Vec::new();
    for record in order {
        let Some(path) = record.path() else { continue };
        let bytes = std::fs::read(path).map_err(|e| {
            QueryError::new(
                "SESSION_QUERY_PERSISTENCE_FAILED",
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        entries.push((format!("{}.jsonl", record.id), bytes));
    }
    zip(&entries)
}

/// Writes the export of `id` to `out`.
pub fn write_export(query: &SessionQuery, id: &str, out: &mut dyn Write) -> Result<(), QueryError> {
    let bytes = export_session(query, id)?;
    out.write_all(&bytes).map_err(|e| {
        QueryError::new(
            "SESSION_QUERY_PERSISTENCE_FAILED",
            format!("cannot write the export: {e}"),
        )
    })
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "tests start their helpers directly"
)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_the_reference_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn the_archive_is_readable_by_unzip() {
        let bytes = zip(&[
            ("a.jsonl".into(), b"{\"x\":1}\n".to_vec()),
            ("b.jsonl".into(), b"two\n".to_vec()),
        ])
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.zip");
        std::fs::write(&file, bytes).unwrap();
        let Ok(out) = std::process::Command::new("unzip")
            .arg("-p")
            .arg(&file)
            .arg("a.jsonl")
            .output()
        else {
            // python's zipfile reads it too
            let out = std::process::Command::new("python3")
                .args(["-c", "import sys,zipfile;print(zipfile.ZipFile(sys.argv[1]).read('a.jsonl').decode(),end='')"])
                .arg(&file)
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), "{\"x\":1}\n");
            return;
        };
        assert_eq!(String::from_utf8_lossy(&out.stdout), "{\"x\":1}\n");
    }
}
