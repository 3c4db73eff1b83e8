//! `man`: the roff page of replicheck or of one of its commands.

use super::*;

/// `man [COMMAND]`: the roff page of replicheck or of one of its commands, on stdout.
pub(super) fn man(command: Option<&str>) -> Result<ExitCode, ConfigError> {
    let top = <Cli as clap::CommandFactory>::command();
    let page = match command {
        None => top,
        Some(name) => {
            let names: Vec<&str> =
                top.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name()).collect();
            let sub = top.find_subcommand(name).filter(|c| !c.is_hide_set()).ok_or_else(|| {
                ConfigError::new(
                    Path::new("man"),
                    format!("no command \"{name}\" (commands: {})", names.join(", ")),
                )
            })?;
            sub.clone()
                .name(format!("replicheck-{name}"))
                .version(top.get_version().unwrap_or_default().to_string())
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut roff)
        .map_err(|e| ConfigError::new(Path::new("man"), format!("cannot render the man page: {e}")))?;
    use std::io::Write;
    std::io::stdout()
        .write_all(&roff)
        .map_err(|e| ConfigError::new(Path::new("man"), format!("cannot write the man page: {e}")))?;
    Ok(0)
}
