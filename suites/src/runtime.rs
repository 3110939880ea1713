//! The ROCm libraries as seen from one worker process: opened and
//! initialised once, on first use, by whichever check needs them first.

use crate::findings::{Code, codes};
use rocgate_harness::Verdict;
use rocgate_rocm::hip::{Hip, HipError};
use rocgate_rocm::hsa::{AgentInfo, Hsa, HsaError};
use rocgate_rocm::library::{Binding, Library};
use rocgate_rocm::miopen::Miopen;
use rocgate_rocm::rccl::Rccl;
use rocgate_rocm::rocblas::Rocblas;
use rocgate_rocm::{LoadError, Search};
use std::sync::{Arc, OnceLock};

/// Lazily opened libraries and their one-time initialisation.
#[derive(Default)]
pub struct Runtime {
    /// Where libraries are searched.
    pub search: Search,
    /// Why the runtime layers do not run here, if they do not.
    pub disabled: Option<(rocgate_harness::SkipReason, String)>,
    hsa: OnceLock<Result<Arc<Hsa>, LoadError>>,
    hsa_init: OnceLock<Result<(), HsaError>>,
    agents: OnceLock<Result<Vec<AgentInfo>, HsaError>>,
    hip: OnceLock<Result<Arc<Hip>, LoadError>>,
    hip_count: OnceLock<Result<i32, HipError>>,
    rocblas: OnceLock<Result<Arc<Rocblas>, LoadError>>,
    miopen: OnceLock<Result<Arc<Miopen>, LoadError>>,
    rccl: OnceLock<Result<Arc<Rccl>, LoadError>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("search", &self.search)
            .finish_non_exhaustive()
    }
}

const INSTALL_HINT: &str = "install the ROCm runtime (the rocm-hip-runtime package, or Debian's libhsa-runtime64-1 and libamdhip64-5) or point rocgate at it with --rocm-path DIR (libraries in DIR/lib) or ROCM_PATH";

/// The verdict for a library that could not be opened: not installed, or
/// installed but refused by the loader, whose words (the dependency it could
/// not find, a bad ELF) are kept.
pub fn missing_library(code: Code, e: &LoadError) -> Verdict {
    let next = match e {
        LoadError::NotFound { .. } => INSTALL_HINT.to_string(),
        LoadError::Failed { path, .. } => match e.missing_dependency() {
            Some(dep) => format!(
                "{path} is installed but needs {dep}, which the loader cannot find: install the package that provides {dep} (`ldd {path}` lists every missing library), or add its directory to LD_LIBRARY_PATH"
            ),
            None => format!(
                "the dynamic loader refused {path} (see its message): check the file is an intact library for this machine's architecture (`file {path}`, `ldd {path}`) and reinstall the package that owns it"
            ),
        },
    };
    Verdict::found(code.finding_next(e.to_string(), next))
}

/// The next step after an HSA start failure: ROCr reports every start failure
/// (no /dev/kfd, no access, no memory) as OUT_OF_RESOURCES, so the cause is
/// below it.
pub fn hsa_init_next_step(status: Option<u32>) -> String {
    match status {
        Some(0x1008) => "ROCr reports every start failure as HSA_STATUS_ERROR_OUT_OF_RESOURCES; the cause is in a lower layer: run `rocgate doctor` (missing /dev/kfd or render node, no permission, no GPU). If those pass, read `dmesg | grep -i kfd` and check `ulimit -l` and that this ROCm release supports the installed amdgpu".to_string(),
        _ => "read `dmesg | grep -i -e kfd -e amdgpu` for the driver's side; check that the ROCm userspace and the amdgpu driver versions are a supported pair".to_string(),
    }
}

impl Runtime {
    /// A runtime searching with `search`.
    pub fn new(search: Search) -> Self {
        Runtime {
            search,
            ..Runtime::default()
        }
    }

    /// A runtime whose checks skip with `reason`.
    pub fn disabled(kind: rocgate_harness::SkipReason, reason: impl Into<String>) -> Self {
        Runtime {
            disabled: Some((kind, reason.into())),
            ..Runtime::default()
        }
    }

    fn enabled(&self) -> Result<(), Verdict> {
        match &self.disabled {
            Some((kind, why)) => Err(Verdict::skip(*kind, why.clone())),
            None => Ok(()),
        }
    }

    /// The library held in `slot`, opened on first use; when it cannot be
    /// opened, a failure with `missing`'s code and the loader's words.
    fn opened<'a, B: Binding>(
        &self,
        slot: &'a OnceLock<Result<Arc<Library<B>>, LoadError>>,
        missing: Code,
    ) -> Result<&'a Arc<Library<B>>, Verdict> {
        self.enabled()?;
        slot.get_or_init(|| Library::open(&self.search))
            .as_ref()
            .map_err(|e| missing_library(missing, e))
    }

    /// The opened HSA library.
    pub fn hsa(&self) -> Result<&Arc<Hsa>, Verdict> {
        self.opened(&self.hsa, codes::HSA_LIBRARY_MISSING)
    }

    /// HSA, initialised.
    pub fn hsa_ready(&self) -> Result<&Arc<Hsa>, Verdict> {
        let hsa = self.hsa()?;
        match self.hsa_init.get_or_init(|| hsa.init()) {
            Ok(()) => Ok(hsa),
            Err(e) => Err(Verdict::found(
                codes::HSA_INIT_FAILED.finding_next(e.to_string(), hsa_init_next_step(e.status())),
            )),
        }
    }

    /// Every HSA agent.
    pub fn agents(&self) -> Result<&[AgentInfo], Verdict> {
        let hsa = self.hsa_ready()?;
        self.agents
            .get_or_init(|| hsa.agents())
            .as_deref()
            .map_err(|e| Verdict::found(codes::HSA_AGENTS_FAILED.finding(e.to_string())))
    }

    /// The opened HIP runtime.
    pub fn hip(&self) -> Result<&Arc<Hip>, Verdict> {
        self.opened(&self.hip, codes::HIP_LIBRARY_MISSING)
    }

    /// The opened rocBLAS.
    pub fn rocblas(&self) -> Result<&Arc<Rocblas>, Verdict> {
        self.opened(&self.rocblas, codes::ROCBLAS_LIBRARY_MISSING)
    }

    /// The opened MIOpen.
    pub fn miopen(&self) -> Result<&Arc<Miopen>, Verdict> {
        self.opened(&self.miopen, codes::MIOPEN_LIBRARY_MISSING)
    }

    /// The opened RCCL.
    pub fn rccl(&self) -> Result<&Arc<Rccl>, Verdict> {
        self.opened(&self.rccl, codes::RCCL_LIBRARY_MISSING)
    }

    /// HIP and its device count, once it has devices.
    pub fn hip_ready(&self) -> Result<(&Arc<Hip>, i32), Verdict> {
        let hip = self.hip()?;
        match self.hip_count.get_or_init(|| hip.device_count()) {
            Ok(n) if *n > 0 => Ok((hip, *n)),
            Ok(_) => Err(Verdict::found(codes::HIP_NO_DEVICE.finding_next("hipGetDeviceCount reports 0 devices", "HIP sees no GPU: run `rocgate doctor` for the layer below; check HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES"))),
            Err(e) => Err(Verdict::found(if e.code() == Some(100) {
                    codes::HIP_NO_DEVICE
                } else {
                    codes::HIP_INIT_FAILED
                }.finding_next(e.to_string(), "HIP starts on ROCr: when hipErrorNoDevice (100) appears, the cause is in a lower layer; run `rocgate doctor` and read the hsa layer's result. Check HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES"))),
        }
    }
}
