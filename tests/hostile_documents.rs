//! Hostile workflow documents never exhaust the machine, hang or panic.
//!
//! Each case writes one hostile document into a temporary directory (nothing large is
//! committed) and runs the real binary on it (`pactgraph validate FILE`, and for some
//! `pactgraph run FILE` too) with its address space capped (`prlimit --as`, or `ulimit -v`
//! through `sh` where `prlimit` is missing) and a wall-clock deadline. What this proves,
//! for every case: the process ends by itself within the deadline, within the memory cap,
//! with exit code 1 or 2, with a message on stderr naming the problem (and the file), and
//! without a panic. A process that runs out of memory (the allocator aborts), overflows
//! its stack or is killed fails the test with an assertion saying so; one that outlives
//! the deadline is killed and fails the test.
//!
//! The cases: the issue's 30-line alias bomb and an alias bomb made of text; nesting
//! 100,000 levels deep in JSON (arrays and objects), YAML flow and block style, and
//! through YAML aliases; invalid UTF-8; NUL bytes; binary garbage (random bytes, random
//! ASCII, and the endless `/dev/zero` and `/dev/urandom`); a named pipe (read once); a 50 MB
//! string (JSON and YAML, closed and unclosed); an empty file; a
//! directory; a missing file.
//!
//! Deadlines are for the unoptimized test build on a shared machine: the cases take well
//! under a second each except the 50 MB ones (a few seconds for YAML, whose scanner is
//! slow unoptimized).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The address-space cap for ordinary cases (the worst, the alias bomb stopped after
/// copying a million nodes, was measured to fit in 128 MiB). Without its bound the alias
/// bomb would need about 10^30 nodes.
const SMALL_MEMORY: u64 = 256 << 20;
/// The cap for the 50 MB cases: under eight times the input (measured to fit in 256 MiB,
/// with the input held as the file's text, the parsed string and the source map's copy).
const LARGE_MEMORY: u64 = 384 << 20;
/// The cap for running a document whose aliases copy 900,000 nodes: that value then
/// lives in the run's state, its trace and its output (about 21 MB of JSON); measured to
/// need between 384 and 512 MiB.
const WITHIN_LIMITS_MEMORY: u64 = 1 << 30;
/// Deadline for ordinary cases.
const SMALL_TIME: Duration = Duration::from_secs(10);
/// Deadline for the 50 MB cases.
const LARGE_TIME: Duration = Duration::from_secs(40);

/// How one run of the binary ended.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// A temporary directory holding the case's document.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).expect("the document is written");
        path
    }

    /// Runs `pactgraph ARGS` capped at `memory` bytes of address space, killing it at
    /// `deadline`; output goes to files, so a large output cannot block the child.
    fn run(&self, args: &[&str], memory: u64, deadline: Duration) -> Outcome {
        let bin = env!("CARGO_BIN_EXE_pactgraph");
        let prlimit = Path::new("/usr/bin/prlimit");
        let mut cmd = if prlimit.exists() {
            let mut c = Command::new(prlimit);
            c.arg(format!("--as={memory}")).arg(bin);
            c
        } else {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -v {}; exec \"$0\" \"$@\"", memory / 1024))
                .arg(bin);
            c
        };
        let out_path = self.dir.path().join("stdout.txt");
        let err_path = self.dir.path().join("stderr.txt");
        let stdout = File::create(&out_path).expect("stdout file");
        let stderr = File::create(&err_path).expect("stderr file");
        let start = Instant::now();
        let mut child = cmd
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .env("PACTGRAPH_STORE", "none")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("the binary starts");
        let status = loop {
            if let Some(status) = child.try_wait().expect("the child can be waited for") {
                break status;
            }
            if start.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`pactgraph {}` did not finish within {deadline:?}",
                    args.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed = start.elapsed();
        let read = |p: &Path| {
            String::from_utf8_lossy(&std::fs::read(p).expect("output file")).into_owned()
        };
        Outcome {
            code: status.code(),
            stdout: read(&out_path),
            stderr: read(&err_path),
            elapsed,
        }
    }
}

/// Asserts that `pactgraph ARGS` failed cleanly: exit 1 or 2, no panic, no abort, and a
/// message on stderr holding every one of `expected`.
fn assert_refused(case: &Case, args: &[&str], memory: u64, deadline: Duration, expected: &[&str]) {
    let o = case.run(args, memory, deadline);
    let what = format!("`pactgraph {}`", args.join(" "));
    let tail: String = {
        let chars: Vec<char> = o.stderr.chars().collect();
        chars[chars.len().saturating_sub(2000)..].iter().collect()
    };
    assert!(
        !o.stderr.contains("memory allocation of"),
        "{what} ran out of its {} MiB of address space after {:?}: {tail}",
        memory >> 20,
        o.elapsed
    );
    assert!(
        !o.stderr.contains("overflowed its stack"),
        "{what} overflowed its stack: {tail}"
    );
    assert!(!o.stderr.contains("panicked"), "{what} panicked: {tail}");
    assert!(
        matches!(o.code, Some(1 | 2)),
        "{what} ended with {:?} (a signal when None) after {:?}: {tail}",
        o.code,
        o.elapsed
    );
    for e in expected {
        assert!(o.stderr.contains(e), "{what}: stderr lacks `{e}`: {tail}");
    }
    assert!(
        o.stdout.len() < 1 << 20,
        "{what} printed {} bytes on stdout",
        o.stdout.len()
    );
    eprintln!("{what}: exit {:?} in {:?}", o.code, o.elapsed);
}

fn validate_refuses(case: &Case, file: &Path, expected: &[&str]) {
    let name = file.display().to_string();
    let mut expected = expected.to_vec();
    expected.push(&name);
    assert_refused(
        case,
        &["validate", &name],
        SMALL_MEMORY,
        SMALL_TIME,
        &expected,
    );
}

fn run_refuses(case: &Case, file: &Path, expected: &[&str]) {
    let name = file.display().to_string();
    let mut expected = expected.to_vec();
    expected.push(&name);
    assert_refused(
        case,
        &["run", &name, "--quiet"],
        SMALL_MEMORY,
        SMALL_TIME,
        &expected,
    );
}

/// The issue's document: 30 lines, each anchor a sequence of ten aliases to the one
/// before (10^30 nodes once expanded).
fn alias_bomb() -> String {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..30 {
        let items = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{items}]\n"));
    }
    text
}

#[test]
fn the_issues_alias_bomb_is_refused_at_the_line_that_crosses_the_limit() {
    let case = Case::new();
    let text = alias_bomb();
    assert_eq!(text.lines().count(), 30);
    let file = case.write("bomb.yaml", &text);
    let expected = [
        "line 6, column 45: aliases expand to more than 1000000 nodes",
        "bomb.yaml:6:45",
    ];
    validate_refuses(&case, &file, &expected);
    run_refuses(&case, &file, &expected);
    // A pipeline's output format too.
    let name = file.display().to_string();
    let o = case.run(
        &["validate", &name, "--format", "json"],
        SMALL_MEMORY,
        SMALL_TIME,
    );
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stdout.contains("\"line\": 6"), "{}", o.stdout);
}

#[test]
fn an_alias_bomb_made_of_text_is_refused() {
    let case = Case::new();
    // A 1 MiB string copied by 100 aliases: few nodes, 100 MiB of text.
    let text = format!(
        "s: &s {}\nl: [{}]\n",
        "y".repeat(1 << 20),
        vec!["*s"; 100].join(", ")
    );
    let file = case.write("text-bomb.yaml", text);
    validate_refuses(
        &case,
        &file,
        &["aliases copy more than 67108864 bytes of text"],
    );
}

fn deep_arrays(levels: usize) -> String {
    format!("{}{}", "[".repeat(levels), "]".repeat(levels))
}

#[test]
fn json_nested_100000_levels_deep_is_refused() {
    let case = Case::new();
    let arrays = case.write("deep-arrays.json", deep_arrays(100_000));
    let objects = case.write(
        "deep-objects.json",
        format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000)),
    );
    let expected = ["nested deeper than 100 levels", "line 1, column"];
    validate_refuses(&case, &arrays, &expected);
    validate_refuses(&case, &objects, &expected);
    run_refuses(&case, &objects, &expected);
    // Inside an otherwise plausible workflow, on its own line.
    let inner = case.write(
        "deep-inner.json",
        format!(
            "{{\"workflow\": \"w\", \"entry\": \"s\",\n\"slices\": {{\"a\": {{\"schema\": {}}}}}}}",
            deep_arrays(100_000)
        ),
    );
    validate_refuses(
        &case,
        &inner,
        &["line 2, column 125: nested deeper than 100"],
    );
}

#[test]
fn yaml_nested_100000_levels_deep_is_refused() {
    let case = Case::new();
    let expected = ["nested deeper than 100 levels"];
    let flow = case.write("deep-flow.yaml", deep_arrays(100_000));
    validate_refuses(&case, &flow, &expected);
    run_refuses(&case, &flow, &expected);
    // Block style: each line one level deeper (2,000 lines; the text grows with the
    // square of the depth).
    let block: String = (0..2_000)
        .map(|i| format!("{}- \n", "  ".repeat(i)))
        .collect();
    let block = case.write("deep-block.yaml", block);
    validate_refuses(
        &case,
        &block,
        &["line 101, column 201: nested deeper than 100"],
    );
    // Through aliases: each anchor wraps the one before; no line nests.
    let mut text = String::from("a0: &a0 [x]\n");
    for i in 1..100_000 {
        text.push_str(&format!("a{i}: &a{i} [*a{}]\n", i - 1));
    }
    let aliases = case.write("deep-aliases.yaml", text);
    validate_refuses(&case, &aliases, &["line 100, column"]);
}

#[test]
fn invalid_utf8_is_refused_with_the_byte_and_its_place() {
    let case = Case::new();
    for name in ["latin1.json", "latin1.yaml"] {
        let file = case.write(name, b"{\"workflow\": \"caf\xe9\"}\n");
        validate_refuses(
            &case,
            &file,
            &["is not UTF-8 text: byte 0xe9 at line 1, column 18"],
        );
    }
    let file = case.write("latin1-run.yaml", b"workflow: x\nentry: \xff\n");
    run_refuses(&case, &file, &["byte 0xff at line 2, column 8"]);
}

#[test]
fn nul_bytes_are_refused_with_their_place() {
    let case = Case::new();
    let json = case.write("nul.json", b"{\"workflow\":\n \"a\0b\"}");
    let yaml = case.write("nul.yaml", b"workflow: a\0b\n");
    validate_refuses(&case, &json, &["line 2, column 4: NUL byte"]);
    validate_refuses(&case, &yaml, &["line 1, column 12: NUL byte"]);
    run_refuses(&case, &yaml, &["NUL byte"]);
}

/// Deterministic pseudo-random bytes (a linear congruential generator).
fn noise(len: usize, seed: u64, map: impl Fn(u8) -> u8) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            map((x >> 56) as u8)
        })
        .collect()
}

#[test]
fn binary_garbage_is_refused() {
    let case = Case::new();
    for (i, name) in ["noise.json", "noise.yaml", "noise.yml", "noise"]
        .iter()
        .enumerate()
    {
        let file = case.write(name, noise(1 << 20, i as u64, |b| b));
        validate_refuses(&case, &file, &["is not UTF-8 text"]);
    }
    // Endless devices: reading stops at the first NUL byte or the first bad chunk.
    let zero = Path::new("/dev/zero");
    if zero.exists() {
        validate_refuses(&case, zero, &["line 1, column 1: NUL byte"]);
        run_refuses(&case, zero, &["NUL byte"]);
    }
    let random = Path::new("/dev/urandom");
    if random.exists() {
        validate_refuses(&case, random, &["error[PG0000]"]);
    }
    // Printable garbage that is valid UTF-8 reaches the parsers.
    for (i, name) in ["ascii.json", "ascii.yaml"].iter().enumerate() {
        let file = case.write(name, noise(1 << 20, 7 + i as u64, |b| 1 + b % 127));
        validate_refuses(&case, &file, &["error[PG0000]: line "]);
        run_refuses(&case, &file, &["error[PG0000]: line "]);
    }
}

/// Proves a document is read once: a named pipe that gives a NUL byte once and then
/// ends is refused naming the pipe, the line and the column (the report shows the text
/// the error was found in; a second read, to show the place, would block on the pipe
/// until the deadline kills the process, or, for `/dev/urandom`, read other bytes and
/// lose the file's name).
#[test]
fn a_pipe_is_read_once() {
    let case = Case::new();
    let fifo = case.dir.path().join("pipe.json");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let writer = {
        let fifo = fifo.clone();
        // Blocks until the reader opens the pipe, writes once, then closes it.
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .expect("the pipe opens for writing");
            f.write_all(b"\0 not a document").expect("written");
        })
    };
    validate_refuses(&case, &fifo, &["line 1, column 1: NUL byte"]);
    writer.join().expect("the writer ends");
}

/// A 50 MB string, in a document the loader reads whole.
const HUGE: usize = 50_000_000;

fn assert_huge_refused(case: &Case, args: &[&str], expected: &[&str]) {
    assert_refused(case, args, LARGE_MEMORY, LARGE_TIME, expected);
}

#[test]
fn a_50_mb_string_loads_or_fails_quickly_in_bounded_memory() {
    let case = Case::new();
    let s = "x".repeat(HUGE);
    let json = case.write("huge.json", format!("{{\"workflow\": \"{s}\"}}"));
    let yaml = case.write("huge.yaml", format!("workflow: \"{s}\"\n"));
    let open = case.write("huge-open.json", format!("{{\"workflow\": \"{s}"));
    drop(s);
    for file in [&json, &yaml] {
        let name = file.display().to_string();
        // The document loads; it lacks `entry`, and says so naming the file.
        let expected = ["missing field `entry`", name.as_str()];
        assert_huge_refused(&case, &["validate", &name], &expected);
    }
    let name = json.display().to_string();
    assert_huge_refused(
        &case,
        &["run", &name, "--quiet"],
        &["missing field `entry`", &name],
    );
    // The 50 MB line is not rendered, but the place and the file are named.
    let name = open.display().to_string();
    assert_huge_refused(
        &case,
        &["validate", &name],
        &[
            "line 1, column 14: Unterminated string literal",
            &format!("{name}:1:14 (the line is too long to show)"),
        ],
    );
}

#[test]
fn empty_files_are_refused() {
    let case = Case::new();
    for name in ["empty.json", "empty.yaml"] {
        let file = case.write(name, "");
        validate_refuses(&case, &file, &["the document is empty"]);
        run_refuses(&case, &file, &["the document is empty"]);
    }
    let blank = case.write("blank.yaml", "\n\n   \n# only a comment\n");
    validate_refuses(&case, &blank, &["the document is empty"]);
}

#[test]
fn a_directory_or_a_missing_file_is_refused() {
    let case = Case::new();
    let dir = case.dir.path().join("workflow.json");
    std::fs::create_dir(&dir).expect("a directory");
    validate_refuses(&case, &dir, &["cannot read"]);
    run_refuses(&case, &dir, &["cannot read"]);
    let missing = case.dir.path().join("missing.yaml");
    validate_refuses(&case, &missing, &["cannot read"]);
    run_refuses(&case, &missing, &["cannot read"]);
}

/// The limits do not get in the way: a document at the depth limit, and one whose
/// aliases copy nearly the most nodes allowed, validate and run.
#[test]
fn documents_within_the_limits_still_run() {
    let case = Case::new();
    let base = "workflow: w\nentry: root\nslices: {answer: {}}\n\
                supervisors: {root: {allow: [reply]}}\n\
                nodes:\n  reply:\n    supervisor: root\n    writes: [answer]\n    \
                triggers: [{when: true}]\n    terminal: true\n    run: {set: {answer: VALUE}}\n";
    // root, nodes, reply, run, set: the answer's value starts at level 6.
    let deep = base.replace("VALUE", &deep_arrays(100 - 5));
    let aliases = {
        let mut v = vec!["&a0 [x, x, x, x, x, x, x, x, x, x]".to_string()];
        for i in 1..5 {
            v.push(format!(
                "&a{i} [{}]",
                vec![format!("*a{}", i - 1); 10].join(", ")
            ));
        }
        // 123,440 nodes copied above, and 7 * 111,111 here: 901,217 in all.
        v.push(format!("[{}]", ["*a4"; 7].join(", ")));
        base.replace("VALUE", &format!("[{}]", v.join(",\n      ")))
    };
    for (name, text) in [("deep.yaml", deep), ("aliases.yaml", aliases)] {
        let file = case.write(name, text);
        let file = file.display().to_string();
        let o = case.run(&["validate", &file], SMALL_MEMORY, SMALL_TIME);
        assert_eq!(o.code, Some(0), "{name}: {}", o.stderr);
        let o = case.run(&["run", &file, "--quiet"], WITHIN_LIMITS_MEMORY, SMALL_TIME);
        assert_eq!(o.code, Some(0), "{name}: {}", o.stderr);
        assert!(o.stdout.contains("\"completed\""), "{name}: {}", o.stdout);
        eprintln!("{name}: run in {:?}", o.elapsed);
    }
    let over = base.replace("VALUE", &deep_arrays(100 - 4));
    let over = case.write("over.yaml", over);
    validate_refuses(
        &case,
        &over,
        &["line 11, column 120: nested deeper than 100"],
    );
}
