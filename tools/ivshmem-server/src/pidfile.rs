//! The optional pid file, for scripts that stop the server with kill(1).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub struct PidFile(PathBuf);

impl PidFile {
    pub fn create(path: &Path) -> io::Result<Self> {
        fs::write(path, format!("{}\n", std::process::id())).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
        })?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
