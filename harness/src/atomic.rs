//! Writes report files so that a reader never sees a half-written one.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory,
/// then renames it into place.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".rocgate-")
        .tempfile_in(dir)
        .map_err(|e| {
            format!(
                "failed to create a temporary file in {}: {e}",
                dir.display()
            )
        })?;
    // Reports are for CI to read; a temp file starts out private.
    tmp.write_all(bytes)
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("failed to write {}: {e}", tmp.path().display()))?;
    tmp.persist(path).map_err(|e| {
        format!(
            "failed to move the report into {}: {}",
            path.display(),
            e.error
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.xml");
        super::write(&p, b"one").unwrap();
        super::write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = super::write(&dir.path().join("missing/r.xml"), b"x").unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }
}
