//! [`Text`]: text appended to a byte buffer through a block on the stack, what the
//! hand-written JSON texts (`json_text.rs`, `event_text.rs`) write into (ADR 0066).
//!
//! `Vec::extend_from_slice`, `Vec::reserve` and `<[u8]>::copy_from_slice`'s body are
//! generic and not `#[inline]`: a crate gets one copy of each, in one of its codegen units,
//! and without thin-local LTO (`lto = "off"`) a writer in another unit calls them out of
//! line for every piece of text, a field name or a comma, and `memcpy` for each piece's
//! bytes. A [`Text`] copies a piece into its block with a loop the compiler turns into a
//! copy of the piece's length, compiled where the writer is (a few moves for a field name);
//! the block goes to the buffer, one `extend_from_slice`, when it is full and at the end.

use std::io;

/// The block's size: an event's text is about 300 bytes.
const BLOCK: usize = 512;

/// Text appended to a `Vec<u8>`: pieces gather in a block and move to the buffer a block
/// at a time; what is left in the block is moved when the `Text` is dropped.
pub(crate) struct Text<'a> {
    out: &'a mut Vec<u8>,
    block: [u8; BLOCK],
    at: usize,
}

impl<'a> Text<'a> {
    /// Appends to `out`.
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Self {
            out,
            block: [0; BLOCK],
            at: 0,
        }
    }

    /// Appends `bytes`.
    #[inline]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        let end = self.at + bytes.len();
        if end <= BLOCK {
            // An index loop over two slices of one length, rather than `copy_from_slice`
            // or a `zip`, whose bodies are not `#[inline]`: the compiler proves the
            // indexes in bounds and makes it one copy of `bytes.len()` bytes, inline for
            // a constant length.
            let to = &mut self.block[self.at..end];
            let from = &bytes[..to.len()];
            #[allow(clippy::needless_range_loop, clippy::manual_memcpy)]
            for i in 0..to.len() {
                to[i] = from[i];
            }
            self.at = end;
        } else {
            self.put_long(bytes);
        }
    }

    /// Appends `bytes` (at most [`WORDS_MAX`] of them) eight at a time, each word tested by
    /// `plain` first (the last one padded with spaces), and returns true; or appends
    /// nothing and returns false at the first word `plain` refuses. A piece whose length is
    /// known only at run time (an id, digits) is copied with no call: [`Text::put`] calls
    /// `memcpy` for it, which costs more than a short piece's copy (ADR 0070).
    #[inline]
    pub(crate) fn put_words(&mut self, bytes: &[u8], plain: impl Fn(u64) -> bool) -> bool {
        let n = bytes.len();
        debug_assert!(n <= WORDS_MAX, "a piece of {n} bytes is not short");
        if self.at + n + 8 > BLOCK {
            self.flush();
        }
        let at = self.at;
        let mut i = 0;
        while i + 8 <= n {
            let w = u64::from_ne_bytes(bytes[i..i + 8].try_into().expect("eight bytes"));
            if !plain(w) {
                return false;
            }
            self.put_word(at + i, w);
            i += 8;
        }
        if i < n {
            let w = short_word(&bytes[i..]);
            if !plain(w) {
                return false;
            }
            // Its padding lands past the text's end, where the next piece goes.
            self.put_word(at + i, w);
        }
        self.at = at + n;
        true
    }

    /// Writes `w`'s eight bytes into the block at `at` (one store).
    #[inline(always)]
    fn put_word(&mut self, at: usize, w: u64) {
        let bytes = w.to_ne_bytes();
        let to = &mut self.block[at..at + 8];
        #[allow(clippy::needless_range_loop, clippy::manual_memcpy)]
        for k in 0..8 {
            to[k] = bytes[k];
        }
    }

    /// Appends one byte.
    #[inline]
    pub(crate) fn push(&mut self, byte: u8) {
        if self.at == BLOCK {
            self.flush();
        }
        self.block[self.at] = byte;
        self.at += 1;
    }

    /// The length of the buffer's text: its bytes before this `Text`'s and those written.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.out.len() + self.at
    }

    /// The buffer's text (its bytes before this `Text`'s and those written).
    pub(crate) fn as_bytes(&mut self) -> &[u8] {
        self.flush();
        self.out
    }

    /// Removes the text's bytes `at..at + n` (what is after them moves back).
    pub(crate) fn cut(&mut self, at: usize, n: usize) {
        self.flush();
        let end = at.saturating_add(n).min(self.out.len());
        self.out.drain(at.min(end)..end);
    }

    /// Removes the text's last byte.
    pub(crate) fn pop(&mut self) {
        if self.at > 0 {
            self.at -= 1;
        } else {
            self.out.pop();
        }
    }

    /// Moves the block's bytes to the buffer.
    #[inline(never)]
    fn flush(&mut self) {
        self.out.extend_from_slice(&self.block[..self.at]);
        self.at = 0;
    }

    /// Appends a piece that does not fit in the block's room.
    #[cold]
    #[inline(never)]
    fn put_long(&mut self, bytes: &[u8]) {
        self.flush();
        if bytes.len() >= BLOCK {
            self.out.extend_from_slice(bytes);
        } else {
            self.block[..bytes.len()].copy_from_slice(bytes);
            self.at = bytes.len();
        }
    }
}

/// The longest piece [`Text::put_words`] takes.
pub(crate) const WORDS_MAX: usize = 256;

/// `tail` (one to seven bytes) as a word, the lanes past it spaces (which no JSON text
/// escapes): four, two and one bytes moved as `tail`'s length has them, no loop (which
/// would become a `memcpy` call).
#[inline(always)]
pub(crate) fn short_word(tail: &[u8]) -> u64 {
    let n = tail.len();
    let mut word = [b' '; 8];
    let mut k = 0;
    if n & 4 != 0 {
        word[..4].copy_from_slice(&tail[..4]);
        k = 4;
    }
    if n & 2 != 0 {
        word[k] = tail[k];
        word[k + 1] = tail[k + 1];
        k += 2;
    }
    if n & 1 != 0 {
        word[k] = tail[k];
    }
    u64::from_ne_bytes(word)
}

impl Drop for Text<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// What `serde_json` writes for the rare parts of a text.
impl io::Write for Text<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.put(buf);
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.put(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the buffer holds exactly what was written, before and after, across growth
    /// from no room at all, with cuts and pops; and that `serde_json` writes through it.
    #[test]
    fn holds_what_was_written_across_growth() {
        let mut out = b"head:".to_vec();
        let mut expected = out.clone();
        {
            let mut text = Text::new(&mut out);
            for i in 0..500u32 {
                let piece = format!("piece {i};");
                text.put(piece.as_bytes());
                expected.extend_from_slice(piece.as_bytes());
                text.push(b',');
                expected.push(b',');
            }
            assert_eq!(text.len(), expected.len());
            text.cut(5, 8);
            expected.drain(5..13);
            text.pop();
            expected.pop();
            text.put(&[b'x'; 1500]);
            expected.extend_from_slice(&[b'x'; 1500]);
            text.pop();
            expected.pop();
            serde_json::to_writer(&mut text, &serde_json::json!({"a": [1.5, "x\n"]}))
                .expect("writes");
            expected.extend_from_slice(br#"{"a":[1.5,"x\n"]}"#);
            assert_eq!(text.as_bytes(), &expected[..]);
        }
        assert_eq!(out, expected);
    }

    /// Proves `put_words` appends exactly its bytes for every length up to `WORDS_MAX`, at
    /// every position in the block (across its end too), and appends nothing when `plain`
    /// refuses a word, the first, a middle or the padded last one.
    #[test]
    fn put_words_appends_its_bytes_or_nothing() {
        let piece: Vec<u8> = (0..WORDS_MAX).map(|i| b'a' + (i % 26) as u8).collect();
        let mut out = Vec::new();
        let mut expected = Vec::new();
        {
            let mut text = Text::new(&mut out);
            for lead in 0..20 {
                for n in 0..=WORDS_MAX {
                    text.put(&piece[..lead]);
                    expected.extend_from_slice(&piece[..lead]);
                    assert!(text.put_words(&piece[..n], |_| true));
                    expected.extend_from_slice(&piece[..n]);
                    // Refused at the first word or at the one holding byte `n - 1` (the
                    // padded last word when `n` is not a multiple of eight): nothing of
                    // the piece appended.
                    for at in [0, n.saturating_sub(1)].into_iter().filter(|_| n > 0) {
                        let mut marked = piece[..n].to_vec();
                        marked[at] = 0;
                        assert!(!text.put_words(&marked, |w| !w.to_ne_bytes().contains(&0)));
                    }
                    assert_eq!(text.len(), expected.len());
                }
            }
            assert_eq!(text.as_bytes(), &expected[..]);
        }
        assert_eq!(out, expected);
    }

    /// A cut past the end removes what there is.
    #[test]
    fn a_cut_past_the_end_stops_at_it() {
        let mut out = Vec::new();
        {
            let mut text = Text::new(&mut out);
            text.put(b"abcdef");
            text.cut(4, 10);
        }
        assert_eq!(out, b"abcd");
    }
}
