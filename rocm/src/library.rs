//! One opened ROCm library and its symbol table.
//!
//! HSA, HIP, hiprtc, rocBLAS, MIOpen and RCCL differ only in their sonames,
//! their symbols and how they word a failed call, so each is a [`Library`]
//! of its own symbol table: opening (through [`Search`], so the search order
//! and the loader's words are the same for all), symbol lookup and status
//! checks are written once, here.

#![allow(
    unsafe_code,
    reason = "calls the libraries' status-to-string functions"
)]

use crate::loader::{LibrarySpec, LoadError, Loaded, MissingSymbol, Search};
use std::ffi::{CStr, c_char};
use std::path::Path;
use std::sync::Arc;

/// A table of a library's C functions (declared with `symbol_table!`), one
/// `Result` per function so a missing symbol is an error value at the call
/// that needs it, never a failure to open the library.
pub trait SymbolTable: Sized {
    /// Looks every symbol up in `lib`.
    fn load(lib: &Loaded) -> Self;
}

/// What [`Library`] needs to know of one ROCm library: where it is, what its
/// calls return, and how it words a failure.
pub trait Binding: SymbolTable {
    /// The library's name and sonames.
    const LIBRARY: LibrarySpec;
    /// The C type its calls return (`hsa_status_t`, `hipError_t`, ...).
    type Status: Copy + PartialEq + 'static;
    /// The error its calls fail with.
    type Error: From<MissingSymbol>;
    /// The status of a call that succeeded.
    const SUCCESS: Self::Status;
    /// Status names from the library's headers, for messages when the
    /// library cannot word a status itself.
    const STATUS_NAMES: &'static [(Self::Status, &'static str)];
    /// The name of a status that [`Binding::STATUS_NAMES`] lacks.
    const UNKNOWN_STATUS: &'static str;

    /// Whether a call that returned `status` succeeded.
    fn succeeded(status: Self::Status) -> bool {
        status == Self::SUCCESS
    }

    /// The library's own text for `status`, from its status-to-string
    /// function; `None` when it lacks one or has nothing to say.
    fn describe(&self, status: Self::Status) -> Option<String>;

    /// The error for `call` having returned `status`.
    fn error(&self, call: &'static str, status: Self::Status) -> Self::Error;

    /// The header name of `status`.
    fn status_name(status: Self::Status) -> &'static str {
        Self::STATUS_NAMES
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(Self::UNKNOWN_STATUS, |(_, name)| name)
    }

    /// The library's own text for `status`, else its header name: a
    /// library may be too old for its string function, and an empty text
    /// says nothing.
    fn describe_or_name(&self, status: Self::Status) -> String {
        self.describe(status)
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| Self::status_name(status).to_string())
    }
}

/// An opened library with its symbols looked up. Function pointers taken
/// from the table stay valid while the `Library` lives, which is why owners
/// of the library's objects hold an `Arc` of it.
pub struct Library<T> {
    pub(crate) table: T,
    loaded: Loaded,
}

impl<T: Binding> std::fmt::Debug for Library<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("name", &T::LIBRARY.name)
            .field("path", &self.loaded.path)
            .finish()
    }
}

impl<T: Binding> Library<T> {
    /// Opens the library through `search` (each soname in each directory,
    /// then the system loader).
    pub fn open(search: &Search) -> Result<Arc<Self>, LoadError> {
        Ok(Arc::new(Self::from_loaded(search.open(&T::LIBRARY)?)))
    }

    /// Looks the table up in an already opened library.
    pub(crate) fn from_loaded(loaded: Loaded) -> Self {
        Library {
            table: T::load(&loaded),
            loaded,
        }
    }

    /// The file that was loaded.
    pub fn path(&self) -> &Path {
        &self.loaded.path
    }

    /// Makes an object with `create`, the table's function named `call` that
    /// writes the new object's handle through its one argument
    /// (`hipStreamCreate`, `rocblas_create_handle`, `miopenCreate`), and
    /// returns that handle for the caller to own and release.
    pub(crate) fn create<H>(
        &self,
        call: &'static str,
        create: &Result<unsafe extern "C" fn(*mut *mut H) -> T::Status, MissingSymbol>,
    ) -> Result<*mut H, T::Error> {
        let f = create.clone()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the function writes one handle through the pointer.
        self.check(call, unsafe { f(&mut raw) })?;
        Ok(raw)
    }

    /// `Ok` when `status` is success, else the library's error for `call`.
    pub(crate) fn check(&self, call: &'static str, status: T::Status) -> Result<(), T::Error> {
        if T::succeeded(status) {
            Ok(())
        } else {
            Err(self.table.error(call, status))
        }
    }
}

/// A C string a library returned (its status texts are static), or `None`
/// for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for the call.
pub(crate) unsafe fn c_text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and NUL-terminated per the contract.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The text a library wrote into a fixed buffer: up to the first NUL, or the
/// whole buffer when it filled it without one.
pub(crate) fn buffer_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A library's text for a status without the name the message already
/// gives: ROCr's texts start with it ("HSA_STATUS_ERROR_X: what it means")
/// and HIP 5's are the name alone.
pub(crate) fn without_name(text: &str, name: &str) -> String {
    text.strip_prefix(name)
        .map_or(text, |rest| rest.trim_start_matches(':').trim())
        .to_string()
}

/// What a library's `const char *describe(status)` function says about
/// `status` (`rocblas_status_to_string`, `miopenGetErrorString`,
/// `ncclGetErrorString`, `hipGetErrorString`); `None` when the symbol is
/// missing or gives NULL.
pub fn status_text<S>(
    describe: &Result<unsafe extern "C" fn(S) -> *const c_char, MissingSymbol>,
    status: S,
) -> Option<String> {
    let f = describe.as_ref().ok()?;
    // SAFETY: the describe functions take any status value and return a
    // static string or NULL.
    unsafe { c_text(f(status)) }
}

/// A failed call of a library whose calls return a status code with a name
/// (rocBLAS's `rocblas_status`, MIOpen's `miopenStatus_t`).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StatusError {
    /// The library lacks the symbol.
    #[error(transparent)]
    Missing(#[from] MissingSymbol),
    /// The call returned an error status.
    #[error("{call} failed: {name} ({status})")]
    Status {
        /// The function.
        call: &'static str,
        /// The status code.
        status: i32,
        /// Its name or the library's description of it.
        name: String,
    },
    /// Arguments rocgate refused to pass, or an unusable result.
    #[error("{call}: {reason}")]
    Invalid {
        /// The function.
        call: &'static str,
        /// Why.
        reason: String,
    },
}

impl StatusError {
    /// The error of `call` having returned `status`, named as `library`
    /// words it (its own text, else the header name).
    pub(crate) fn of_call<B: Binding<Status = i32>>(
        library: &B,
        call: &'static str,
        status: i32,
    ) -> Self {
        StatusError::Status {
            call,
            status,
            name: library.describe_or_name(status),
        }
    }

    /// The library's status code, when the call returned one.
    pub fn status(&self) -> Option<i32> {
        match self {
            StatusError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocblas::{self, BlasError, BlasHandle};
    use crate::table::symbol_table;
    use std::ffi::c_double;
    use std::path::PathBuf;

    // libm, which every Linux machine has, stands in for a ROCm library: it
    // has `cos` and none of rocgate's symbols.
    const LIBM: LibrarySpec = LibrarySpec {
        name: "the C maths library",
        sonames: &["libm.so.6"],
    };

    symbol_table! {
        struct Libm {
            cos: fn(c_double) -> c_double;
            rocgate_no_such_function: fn(i32) -> *const c_char;
        }
    }

    fn libm() -> Loaded {
        let search = Search {
            rocm_path: Some(PathBuf::from("/nonexistent/rocm")),
        };
        search
            .open(&LIBM)
            .expect("libm.so.6 loads through the system loader")
    }

    /// rocBLAS's bindings over a library that has none of its symbols.
    fn rocblas_over_libm() -> Arc<Library<rocblas::Table>> {
        Arc::new(Library::from_loaded(libm()))
    }

    #[test]
    fn a_table_finds_what_the_library_exports_and_lists_its_c_names() {
        let lib = libm();
        let table = Libm::load(&lib);
        let cos = table.cos.expect("libm exports cos");
        // SAFETY: cos(double) -> double.
        assert_eq!(unsafe { cos(0.0) }, 1.0);
        assert_eq!(Libm::SYMBOLS, ["cos", "rocgate_no_such_function"]);
        let missing = table.rocgate_no_such_function.unwrap_err();
        assert_eq!(missing.symbol, "rocgate_no_such_function");
        assert_eq!(missing.library, lib.path.display().to_string());
    }

    #[test]
    fn a_missing_symbol_is_the_calls_error_naming_symbol_and_library() {
        let blas = rocblas_over_libm();
        assert!(blas.path().to_string_lossy().contains("libm"), "{blas:?}");
        let Err(err) = BlasHandle::new(&blas) else {
            panic!("a rocBLAS handle from libm");
        };
        assert_eq!(
            err.to_string(),
            format!(
                "symbol rocblas_create_handle not found in {}",
                blas.path().display()
            )
        );
        assert_eq!(err.status(), None);
    }

    #[test]
    fn without_a_string_function_a_status_is_named_from_the_headers() {
        let blas = rocblas_over_libm();
        assert_eq!(blas.check("rocblas_sgemm", 0), Ok(()));
        assert_eq!(
            blas.check("rocblas_sgemm", 3),
            Err(BlasError::Status {
                call: "rocblas_sgemm",
                status: 3,
                name: "rocblas_status_invalid_pointer".into()
            })
        );
        let unknown = blas.check("rocblas_sgemm", -7).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "rocblas_sgemm failed: unknown rocblas_status (-7)"
        );
    }

    #[test]
    fn a_missing_soname_is_not_found_with_every_place_tried() {
        struct Absent;
        impl SymbolTable for Absent {
            fn load(_: &Loaded) -> Self {
                Absent
            }
        }
        impl Binding for Absent {
            const LIBRARY: LibrarySpec = LibrarySpec {
                name: "absent library",
                sonames: &["librocgate-absent.so.3", "librocgate-absent.so"],
            };
            type Status = u8;
            type Error = MissingSymbol;
            const SUCCESS: u8 = 0;
            const STATUS_NAMES: &'static [(u8, &'static str)] = &[];
            const UNKNOWN_STATUS: &'static str = "?";
            fn describe(&self, _: u8) -> Option<String> {
                None
            }
            fn error(&self, _: &'static str, _: u8) -> MissingSymbol {
                unreachable!("the library never opens")
            }
        }
        let search = Search {
            rocm_path: Some(PathBuf::from("/nonexistent/rocm")),
        };
        let err = Library::<Absent>::open(&search).unwrap_err();
        let LoadError::NotFound { library, tried } = &err else {
            panic!("{err}");
        };
        assert_eq!(*library, "absent library");
        assert_eq!(
            tried.first().map(String::as_str),
            Some("/nonexistent/rocm/lib/librocgate-absent.so.3")
        );
        assert_eq!(
            tried.last().map(String::as_str),
            Some("librocgate-absent.so (system loader)")
        );
        assert_eq!(err.missing_dependency(), None);
    }

    #[test]
    fn library_text_is_read_up_to_its_nul_and_without_the_name() {
        assert_eq!(buffer_text(b"gfx942\0junk"), "gfx942");
        assert_eq!(buffer_text(b"no nul"), "no nul");
        assert_eq!(buffer_text(b""), "");
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { c_text(std::ptr::null()) }, None);
        assert_eq!(
            without_name("HSA_STATUS_ERROR: A generic error", "HSA_STATUS_ERROR"),
            "A generic error"
        );
        assert_eq!(without_name("hipErrorNoDevice", "hipErrorNoDevice"), "");
        assert_eq!(
            without_name("no ROCm-capable device", "hipErrorNoDevice"),
            "no ROCm-capable device"
        );
    }
}
