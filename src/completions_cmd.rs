//! `rocgate completions SHELL` and `rocgate man`: shell completions and
//! the man page, generated from the command line itself (`clap_complete`,
//! `clap_mangen`), so they cannot drift from the flags. A package installs
//! their output (`/usr/share/bash-completion/completions/rocgate`,
//! `/usr/share/man/man1/rocgate.1`).

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::{Error, Result};
use crate::output::Output;
use clap::CommandFactory;
use rocgate::exit::Exit;

/// Prints the completion script for the shell asked for.
pub fn completions(args: &CompletionsArgs) -> Result<Exit> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "rocgate", &mut script);
    let script = String::from_utf8(script).map_err(|e| {
        Error::internal(format!(
            "the {} completion script is not UTF-8: {e}",
            args.shell
        ))
    })?;
    Output::Stdout.text(&script)?;
    Ok(Exit::Pass)
}

/// The visible commands, by name.
fn commands(root: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    root.get_subcommands().filter(|s| !s.is_hide_set())
}

/// `command`'s page, rendered.
fn page(command: clap::Command) -> Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .map_err(|e| Error::internal(format!("failed to render the man page: {e}")))?;
    Ok(page)
}

/// Prints the man page (roff): rocgate(1), or rocgate-COMMAND(1); with
/// `--out DIR`, writes every page there.
pub fn man(args: &ManArgs) -> Result<Exit> {
    let root = Cli::command();
    if let Some(dir) = &args.out {
        let write = |name: &str, bytes: Vec<u8>| {
            let path = dir.join(format!("{name}.1"));
            std::fs::write(&path, bytes)
                .map_err(|e| Error::node_io(format!("failed to write {}: {e}", path.display())))
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::node_io(format!("failed to create {}: {e}", dir.display())))?;
        write("rocgate", page(root.clone())?)?;
        for sub in commands(&root) {
            let name = format!("rocgate-{}", sub.get_name());
            write(&name, page(sub.clone().name(name.clone()))?)?;
        }
        return Ok(Exit::Pass);
    }
    let command = match &args.command {
        None => root,
        Some(name) => commands(&root)
            .find(|s| s.get_name() == name)
            .map(|s| s.clone().name(format!("rocgate-{name}")))
            .ok_or_else(|| {
                let names: Vec<&str> = commands(&root).map(|s| s.get_name()).collect();
                Error::usage(format!(
                    "no command {name:?}: the commands are {}",
                    names.join(", ")
                ))
            })?,
    };
    let page = String::from_utf8(page(command)?)
        .map_err(|e| Error::internal(format!("the man page is not UTF-8: {e}")))?;
    Output::Stdout.text(&page)?;
    Ok(Exit::Pass)
}
