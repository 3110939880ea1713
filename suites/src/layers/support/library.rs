//! The runtime check every vendor-library layer (rocBLAS, MIOpen, RCCL)
//! starts with: the library loaded and says its version.

use crate::findings::Code;
use rocgate_harness::{Outcome, Verdict};

/// How a vendor library is named in reports and reinstalled.
pub(crate) struct LibraryName {
    /// As people write it (`rocBLAS`).
    name: &'static str,
    /// The prefix of the facts it returns (`rocblas_library`, `rocblas_version`).
    facts: &'static str,
    /// The package that installs it.
    package: &'static str,
    /// The code when it is missing or damaged.
    missing: Code,
}

impl LibraryName {
    /// A library named `name` in reports, `facts` in facts, installed by `package`.
    pub(crate) const fn new(
        name: &'static str,
        facts: &'static str,
        package: &'static str,
        missing: Code,
    ) -> Self {
        Self {
            name,
            facts,
            package,
            missing,
        }
    }

    /// The library's runtime check: it loaded and reports its version (a
    /// library that cannot say its version is damaged or not that library).
    pub(crate) fn loaded(&self, lib: &dyn Versioned) -> Outcome {
        let path = lib.path().display().to_string();
        let version = lib.version();
        let Self {
            name,
            facts,
            package,
            missing,
        } = self;
        let version = version.map_err(|e| {
            Verdict::found(missing.finding_next(
                format!("{path} loaded but does not report its version: {e}"),
                format!(
                    "the {name} library is damaged or not {name}; reinstall the {package} package"
                ),
            ))
        })?;
        Ok(Verdict::pass(format!("loaded {path}: {name} {version}"))
            .with_fact(&format!("{facts}_library"), path)
            .with_fact(&format!("{facts}_version"), version))
    }
}

/// A loaded vendor library that says its version.
pub(crate) trait Versioned {
    /// Where it was loaded from.
    fn path(&self) -> &std::path::Path;
    /// Its version, or why it did not say.
    fn version(&self) -> Result<String, String>;
}

/// Implements [`Versioned`] for libraries whose binding has `path` and
/// `version` methods.
macro_rules! versioned {
    ($($lib:ty),*) => {$(
        impl Versioned for $lib {
            fn path(&self) -> &std::path::Path {
                <$lib>::path(self)
            }
            fn version(&self) -> Result<String, String> {
                <$lib>::version(self).map_err(|e| e.to_string())
            }
        }
    )*};
}
versioned!(
    rocgate_rocm::rocblas::Rocblas,
    rocgate_rocm::miopen::Miopen,
    rocgate_rocm::rccl::Rccl
);
