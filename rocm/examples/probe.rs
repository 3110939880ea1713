//! Prints what the ROCm libraries on this machine say: where they were
//! loaded from, their versions, `hsa_init` and `hipGetDeviceCount`.
//! `cargo run -p rocgate-rocm --example probe [ROCM_PATH]`

use rocgate_rocm::hip::{Hip, format_version};
use rocgate_rocm::hsa::Hsa;
use rocgate_rocm::loader::Search;

fn main() {
    let search = Search {
        rocm_path: std::env::args_os().nth(1).map(Into::into),
    };
    match Hsa::open(&search) {
        Err(e) => println!("hsa: {e}"),
        Ok(hsa) => {
            println!("hsa: loaded {}", hsa.path().display());
            match hsa.init() {
                Ok(()) => println!(
                    "hsa_init: ok, version {:?}, agents {:?}",
                    hsa.version(),
                    hsa.agents().map(|a| a.len())
                ),
                Err(e) => println!("{e}"),
            }
        }
    }
    match Hip::open(&search) {
        Err(e) => println!("hip: {e}"),
        Ok(hip) => {
            println!("hip: loaded {}", hip.path().display());
            match hip.runtime_version() {
                Ok(v) => println!("hipRuntimeGetVersion: {v} ({})", format_version(v)),
                Err(e) => println!("{e}"),
            }
            match hip.device_count() {
                Ok(n) => println!("hipGetDeviceCount: {n}"),
                Err(e) => println!("{e}"),
            }
        }
    }
}
