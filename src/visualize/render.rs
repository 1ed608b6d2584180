//! Rendering DOT to an image with Graphviz's `dot` program.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An image format Graphviz's `dot` can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// `-Tsvg`.
    Svg,
    /// `-Tpng`.
    Png,
    /// `-Tpdf`.
    Pdf,
}

impl ImageFormat {
    /// The format named by a file's extension (`.svg`, `.png`, `.pdf`, any case), if any.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "svg" => Some(Self::Svg),
            "png" => Some(Self::Png),
            "pdf" => Some(Self::Pdf),
            _ => None,
        }
    }

    /// The name `dot -T` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Svg => "svg",
            Self::Png => "png",
            Self::Pdf => "pdf",
        }
    }
}

/// Why rendering failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// Graphviz is not installed.
    #[error(
        "Graphviz's `dot` was not found on PATH; install it (Debian/Ubuntu: `apt-get install graphviz`, macOS: `brew install graphviz`) or write `--output file.dot`"
    )]
    DotNotFound,
    /// `dot` could not be started or fed.
    #[error("running Graphviz's `dot`: {0}")]
    Io(#[from] std::io::Error),
    /// `dot` ran and failed.
    #[error("Graphviz's `dot` failed writing {}: {message}", path.display())]
    Failed {
        /// The output file.
        path: PathBuf,
        /// What `dot` said on stderr (or its exit status).
        message: String,
    },
}

/// Runs `dot -T<format> -o <output>` (no shell) on `dot_text`.
pub fn render(dot_text: &str, format: ImageFormat, output: &Path) -> Result<(), RenderError> {
    render_with("dot", dot_text, format, output)
}

/// [`render`] with the program to run named (tests use a missing one).
pub(crate) fn render_with(
    program: &str,
    dot_text: &str,
    format: ImageFormat,
    output: &Path,
) -> Result<(), RenderError> {
    let mut child = match Command::new(program)
        .arg(format!("-T{}", format.name()))
        .arg("-o")
        .arg(output)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RenderError::DotNotFound);
        }
        Err(e) => return Err(e.into()),
    };
    // Feed stdin from this thread; dot reads it all before writing, and its stderr is
    // small, so there is no deadlock.
    let fed = match child.stdin.take() {
        Some(mut stdin) => stdin.write_all(dot_text.as_bytes()),
        None => Ok(()),
    };
    let result = child.wait_with_output()?;
    if !result.status.success() {
        let stderr = String::from_utf8_lossy(&result.stderr).trim().to_string();
        return Err(RenderError::Failed {
            path: output.to_path_buf(),
            message: if stderr.is_empty() {
                result.status.to_string()
            } else {
                stderr
            },
        });
    }
    fed?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_extensions() {
        assert_eq!(
            ImageFormat::from_path(Path::new("a/b.SVG")),
            Some(ImageFormat::Svg)
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("x.png")),
            Some(ImageFormat::Png)
        );
        assert_eq!(ImageFormat::from_path(Path::new("x.dot")), None);
        assert_eq!(ImageFormat::from_path(Path::new("noext")), None);
    }

    #[test]
    fn a_missing_dot_says_how_to_install_it() {
        let err = render_with(
            "pactgraph-no-such-program-dot",
            "digraph {}",
            ImageFormat::Svg,
            Path::new("/nonexistent/out.svg"),
        )
        .unwrap_err();
        assert!(matches!(err, RenderError::DotNotFound));
        let msg = err.to_string();
        assert!(msg.contains("apt-get install graphviz"), "{msg}");
        assert!(msg.contains("--output file.dot"), "{msg}");
    }
}
