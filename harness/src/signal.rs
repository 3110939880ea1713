//! How the run's interrupt flag names the signal that set it. The flag is an
//! `AtomicUsize` holding the signal number (0: not interrupted), shared by
//! the executor, the worker pool and the front ends that install handlers.

/// The conventional name of a signal number, for messages.
pub fn signal_name(signal: usize) -> String {
    match signal {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_signals_a_run_stops_on_and_numbers_the_rest() {
        for (number, name) in [
            (2, "SIGINT"),
            (15, "SIGTERM"),
            (1, "SIGHUP"),
            (10, "signal 10"),
        ] {
            assert_eq!(signal_name(number), name);
        }
    }
}
