//! `man`: the roff page of replicheck or of one of its commands.

use super::*;

/// `man [COMMAND]`: the roff page of replicheck or of one of its commands, on stdout.
pub(super) fn man(command: &[String]) -> Result<ExitCode, ConfigError> {
    let top = <Cli as clap::CommandFactory>::command();
    // `store up`, `"store up"` and `store-up` all name the subcommand's page.
    let words: Vec<String> = command.iter().flat_map(|w| w.split_whitespace().map(str::to_string)).collect();
    let mut page = top.clone();
    let mut path = vec!["replicheck".to_string()];
    for (i, word) in words.iter().enumerate() {
        let names: Vec<&str> =
            page.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name()).collect();
        let found = page.find_subcommand(word).filter(|c| !c.is_hide_set()).cloned().or_else(|| {
            // `store-up`: a command and its subcommand joined by a dash.
            let (head, tail) = word.split_once('-')?;
            let sub = page.find_subcommand(head).filter(|c| !c.is_hide_set())?;
            sub.find_subcommand(tail).filter(|c| !c.is_hide_set()).map(|c| {
                path.push(head.to_string());
                c.clone()
            })
        });
        let Some(sub) = found else {
            let within = if i == 0 { String::new() } else { format!(" in \"{}\"", words[..i].join(" ")) };
            let listed = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            return Err(ConfigError::new(
                Path::new("man"),
                format!("no command \"{word}\"{within} (commands: {listed})"),
            ));
        };
        path.push(sub.get_name().to_string());
        page = sub;
    }
    let page = if words.is_empty() {
        top
    } else {
        page.name(path.join("-")).version(top.get_version().unwrap_or_default().to_string())
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
