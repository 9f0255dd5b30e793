//! `zprof generate`: zprof's man pages and shell completions, made from the
//! clap definitions at the moment they are asked for, so a package built
//! from this binary documents exactly this binary (no copy to keep current).

use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory as _;

use crate::cli::args::{Cli, Generate, GenerateArgs};

/// Runs `zprof generate`.
pub fn generate(args: GenerateArgs) -> anyhow::Result<i32> {
    match args.what {
        Generate::Man { dir } => man_pages(&dir),
        Generate::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "zprof", &mut std::io::stdout());
            Ok(0)
        }
    }
}

/// zprof.1 and a page per subcommand (zprof-record.1, ...), as man expects
/// them for `man zprof-record`.
fn man_pages(dir: &Path) -> anyhow::Result<i32> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let command = Cli::command();
    write_page(dir, &command)?;
    for sub in command.get_subcommands() {
        // clap_mangen names a page by the command it renders, so the
        // subcommand takes its page's name (zprof-record), the synopsis the
        // command line (zprof record) and the footer zprof's version.
        let full = sub
            .clone()
            .name(format!("zprof-{}", sub.get_name()))
            .bin_name(format!("zprof {}", sub.get_name()))
            .version(env!("CARGO_PKG_VERSION"));
        write_page(dir, &full)?;
    }
    Ok(0)
}

/// One page, `DIR/NAME.1`.
fn write_page(dir: &Path, command: &clap::Command) -> anyhow::Result<()> {
    let path = dir.join(format!("{}.1", command.get_name()));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .with_context(|| format!("rendering {}", path.display()))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))
}
