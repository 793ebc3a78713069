//! Quoting for POSIX shells: a command run over SSH is one string that the remote login
//! shell parses, so every path, address or name put into it goes through [`quote`].

/// `text` as one shell word: as it is when it holds only characters no shell treats
/// specially, else in single quotes (inside which nothing is special but the quote itself,
/// written `'\''`). The empty string is `''`.
pub fn quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Every word quoted, joined by spaces: a command line.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_as_they_are() {
        assert_eq!(quote("/usr/bin/redis-server"), "/usr/bin/redis-server");
        assert_eq!(quote("10.77.0.2:6379"), "10.77.0.2:6379");
        assert_eq!(quote("+20.000"), "+20.000");
    }

    #[test]
    fn anything_else_is_single_quoted() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("a\nb"), "'a\nb'");
        assert_eq!(quote("*;|&`"), "'*;|&`'");
        assert_eq!(join(&["echo", "a b", "c"]), "echo 'a b' c");
    }

    /// The shell gives back exactly the word quoted, whatever it holds.
    #[test]
    fn the_shell_reads_back_what_was_quoted() {
        let words = [
            "plain",
            "",
            "two words",
            "it's",
            "'",
            "''",
            "\"double\"",
            "$HOME `id` $(id) \\ ! * ? [a] ~ # ; & | < > ( ) { }",
            "new\nline\ttab",
            "-n",
            "ünïcödé",
        ];
        for word in words {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", quote(word)))
                .output()
                .expect("sh");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                word,
                "{}",
                quote(word)
            );
        }
    }
}
