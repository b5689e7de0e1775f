//! `raidctl completions` and the hidden `raidctl generate`: shell completions and man pages,
//! both generated from the clap definitions.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell;
use raidcore::{Error, Result};

use crate::cli::Cli;

/// Print shell completions
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// Shell to generate completions for
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Generate man pages and completions into a directory (for packaging)
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Output directory for man pages (raidctl.8, raidctl-SUBCOMMAND.8)
    #[arg(long)]
    pub man: Option<PathBuf>,
    /// Output directory for completions (bash, zsh, fish)
    #[arg(long)]
    pub completions: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "raidctl", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, data: &[u8]) -> Result<()> {
    std::fs::write(path, data).map_err(|e| Error::io(e, "write", &path.display().to_string(), 0))
}

fn render(cmd: clap::Command, name: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.name(name.to_string()))
        .section("8")
        .manual("raidctl manual")
        .render(&mut out)
        .map_err(|e| Error::io(e, "render", name, 0))?;
    Ok(out)
}

/// A page for `cmd` named `name`, and one for each of its subcommands, recursively
/// (raidctl-wear-plan.8): every page the SUBCOMMANDS sections point to exists.
fn pages(dir: &Path, cmd: &clap::Command, name: &str) -> Result<()> {
    write(&dir.join(format!("{name}.8")), &render(cmd.clone(), name)?)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages(dir, sub, &format!("{name}-{}", sub.get_name()))?;
    }
    Ok(())
}

pub fn run(a: GenerateArgs) -> Result<ExitCode> {
    let cmd = Cli::command();
    if let Some(dir) = &a.man {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(e, "mkdir", &dir.display().to_string(), 0))?;
        pages(dir, &cmd, "raidctl")?;
    }
    if let Some(dir) = &a.completions {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(e, "mkdir", &dir.display().to_string(), 0))?;
        for shell in Shell::value_variants()
            .iter()
            .filter(|s| matches!(s, Shell::Bash | Shell::Zsh | Shell::Fish))
        {
            let mut out = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "raidctl", &mut out);
            let file = match shell {
                Shell::Bash => "raidctl.bash",
                Shell::Zsh => "_raidctl",
                _ => "raidctl.fish",
            };
            write(&dir.join(file), &out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
