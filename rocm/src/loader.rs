//! Finding and opening vendor libraries: `--rocm-path`/`ROCM_PATH`, then
//! /opt/rocm, then the system loader, trying every soname a library has had.

use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where to look for ROCm libraries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Search {
    /// `--rocm-path DIR`: libraries under `DIR/lib` are tried first.
    pub rocm_path: Option<PathBuf>,
}

/// A library rocgate loads, and the sonames it has shipped under.
#[derive(Clone, Copy, Debug)]
pub struct LibrarySpec {
    /// Human name (`HIP runtime`).
    pub name: &'static str,
    /// File names, most preferred first.
    pub sonames: &'static [&'static str],
}

/// Why a library could not be opened.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No candidate file exists and the system loader found none either.
    #[error("{library} not found; tried: {}", tried.join(", "))]
    NotFound {
        /// The library's human name.
        library: &'static str,
        /// Every path and soname tried, in order.
        tried: Vec<String>,
    },
    /// A file exists but the dynamic loader refused it.
    #[error("failed to load {library} from {path}: {error}")]
    Failed {
        /// The library's human name.
        library: &'static str,
        /// The file.
        path: String,
        /// The loader's message.
        error: String,
    },
}

/// An opened library and where it came from.
#[derive(Debug)]
pub struct Loaded {
    /// The handle; symbols borrowed from it stay valid while it lives.
    pub library: libloading::Library,
    /// The file that was loaded.
    pub path: PathBuf,
}

/// A symbol that is not in a loaded library.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("symbol {symbol} not found in {library}")]
pub struct MissingSymbol {
    /// The symbol.
    pub symbol: &'static str,
    /// The library's path.
    pub library: String,
}

impl Search {
    /// Directories searched before the system loader.
    pub fn directories(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Some(p) = &self.rocm_path {
            dirs.push(p.join("lib"));
        }
        if let Some(p) = std::env::var_os("ROCM_PATH").filter(|p| !p.is_empty()) {
            dirs.push(PathBuf::from(p).join("lib"));
        }
        dirs.push(PathBuf::from("/opt/rocm/lib"));
        dirs.dedup();
        dirs
    }

    /// Opens `spec`: each soname in each directory, then each soname
    /// through the system loader (LD_LIBRARY_PATH, ld.so.cache).
    pub fn open(&self, spec: &LibrarySpec) -> Result<Loaded, LoadError> {
        let mut tried = Vec::new();
        for dir in self.directories() {
            for soname in spec.sonames {
                let path = dir.join(soname);
                tried.push(path.display().to_string());
                if path.exists() {
                    return open_path(spec, &path);
                }
            }
        }
        for soname in spec.sonames {
            tried.push(format!("{soname} (system loader)"));
            // SAFETY: loading a library runs its initialisers; the ROCm
            // libraries are designed to be dlopen'ed (HIP does so with ROCr).
            #[allow(unsafe_code)]
            let opened = unsafe { libloading::Library::new(*soname) };
            match opened {
                Ok(library) => {
                    let path = mapped_path(soname).unwrap_or_else(|| PathBuf::from(soname));
                    return Ok(Loaded { library, path });
                }
                // The loader found the library but not something it needs,
                // or refused it: that is not "not installed", and its words
                // name what is wrong.
                Err(e) if !names_itself_missing(&loader_text(&e), soname) => {
                    return Err(LoadError::Failed {
                        library: spec.name,
                        path: (*soname).to_string(),
                        error: loader_text(&e),
                    });
                }
                Err(_) => {}
            }
        }
        Err(LoadError::NotFound {
            library: spec.name,
            tried,
        })
    }
}

/// Opens the file at `path` as `spec`, with the loader's words if it fails.
pub(crate) fn open_path(spec: &LibrarySpec, path: &Path) -> Result<Loaded, LoadError> {
    // SAFETY: as in `Search::open`.
    #[allow(unsafe_code)]
    let opened = unsafe { libloading::Library::new(path) };
    match opened {
        Ok(library) => Ok(Loaded {
            library,
            path: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        }),
        Err(e) => Err(LoadError::Failed {
            library: spec.name,
            path: path.display().to_string(),
            error: loader_text(&e),
        }),
    }
}

/// The dynamic loader's own words (`dlerror()`): libloading's message is
/// only "dlopen failed", with the loader's text as its source.
fn loader_text(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    }
}

/// Whether a dlopen error says `soname` itself was not found (glibc:
/// "libfoo.so.1: cannot open shared object file: No such file or
/// directory"), rather than a library it needs or a bad file.
fn names_itself_missing(error: &str, soname: &str) -> bool {
    error.contains(&format!("{soname}: cannot open shared object file"))
}

impl LoadError {
    /// The library the loader could not find while loading this one (glibc
    /// names it: "libdrm_amdgpu.so.1: cannot open shared object file"), when
    /// that is why it failed.
    pub fn missing_dependency(&self) -> Option<&str> {
        let LoadError::Failed { error, path, .. } = self else {
            return None;
        };
        let before = error.split_once("cannot open shared object file")?.0;
        // The dependency is the last "name:" before the message; dlerror
        // may prefix the path of the library being loaded.
        let dep = before
            .trim_end()
            .trim_end_matches(':')
            .rsplit(": ")
            .next()?
            .trim();
        let own = Path::new(path).file_name().and_then(|f| f.to_str());
        (!dep.is_empty() && Some(dep) != own && !path.ends_with(dep)).then_some(dep)
    }
}

/// The file the system loader mapped for `soname`, from /proc/self/maps.
fn mapped_path(soname: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let stem = soname.split(".so").next()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(&format!("{stem}.so")))
        })
        .map(PathBuf::from)
}

impl Loaded {
    /// Looks up a function pointer of type `T`.
    ///
    /// # Safety
    /// `T` must be the symbol's true C signature.
    #[allow(unsafe_code)]
    pub unsafe fn function<T: Copy>(&self, symbol: &'static str) -> Result<T, MissingSymbol> {
        let name = std::ffi::CString::new(symbol).map_err(|_| MissingSymbol {
            symbol,
            library: self.path.display().to_string(),
        })?;
        // SAFETY: the caller guarantees the type; the pointer is copied out
        // and used only while `self.library` is alive (the owners keep it).
        unsafe { self.library.get::<T>(name.as_c_str()) }
            .map(|s| *s)
            .map_err(|_| MissingSymbol {
                symbol,
                library: self.path.display().to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_lists_what_was_tried() {
        let spec = LibrarySpec {
            name: "test library",
            sonames: &["librocgate-does-not-exist.so.9"],
        };
        let search = Search {
            rocm_path: Some(PathBuf::from("/nonexistent/rocm")),
        };
        let err = search.open(&spec).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("test library not found; tried: /nonexistent/rocm/lib/librocgate-does-not-exist.so.9"), "{text}");
        assert!(text.contains("/opt/rocm/lib/librocgate-does-not-exist.so.9"));
        assert!(text.contains("(system loader)"));
    }

    #[test]
    fn a_file_that_is_not_a_library_is_a_load_failure() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/libfake.so.1"), b"not an ELF").unwrap();
        let spec = LibrarySpec {
            name: "fake",
            sonames: &["libfake.so.1"],
        };
        let err = Search {
            rocm_path: Some(dir.path().to_path_buf()),
        }
        .open(&spec)
        .unwrap_err();
        assert!(matches!(err, LoadError::Failed { .. }), "{err}");
        assert_eq!(err.missing_dependency(), None);
    }

    #[test]
    fn the_dependency_the_loader_could_not_find_is_named() {
        let failed = |path: &str, error: &str| LoadError::Failed {
            library: "HIP runtime",
            path: path.into(),
            error: error.into(),
        };
        let dep = failed(
            "/opt/rocm/lib/libamdhip64.so.6",
            "libdrm_amdgpu.so.1: cannot open shared object file: No such file or directory",
        );
        assert_eq!(dep.missing_dependency(), Some("libdrm_amdgpu.so.1"));
        let prefixed = failed(
            "libamdhip64.so.6",
            "/opt/rocm/lib/libamdhip64.so.6: libnuma.so.1: cannot open shared object file: No such file or directory",
        );
        assert_eq!(prefixed.missing_dependency(), Some("libnuma.so.1"));
        let itself = failed(
            "/opt/rocm/lib/libamdhip64.so.6",
            "/opt/rocm/lib/libamdhip64.so.6: cannot open shared object file: No such file or directory",
        );
        assert_eq!(itself.missing_dependency(), None);
        assert!(names_itself_missing(
            "libamdhip64.so.6: cannot open shared object file: No such file or directory",
            "libamdhip64.so.6"
        ));
        assert!(!names_itself_missing(
            "libnuma.so.1: cannot open shared object file: No such file or directory",
            "libamdhip64.so.6"
        ));
    }
}
