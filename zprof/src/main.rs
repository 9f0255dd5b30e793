//! zprof's entry point: parse the command line, run, turn errors into one line
//! (the whole cause chain) and an exit status.
use clap::Parser as _;

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = zprof::cli::args::Cli::parse();
    let code = match zprof::cli::commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("zprof: {err:#}");
            zprof::cli::commands::exit_code_for(&err)
        }
    };
    std::process::exit(code);
}
