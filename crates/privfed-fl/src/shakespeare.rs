//! Tiny Shakespeare (`DIR/tinyshakespeare/input.txt`) as a federated next-character dataset with
//! one client per speaking role (the Shakespeare task of LEAF and TensorFlow Federated, used by
//! paper 001).
//!
//! ## Format
//! Plain UTF-8 text made of **turns** separated by blank lines. A turn is a speaker line `NAME:`
//! followed by the lines spoken, up to the next blank line (or the end of the file):
//! ```text
//! First Citizen:
//! Before we proceed any further, hear me speak.
//!
//! All:
//! Speak, speak.
//! ```
//! A speaker line is the first line of a block and ends with `:`; the name is what precedes the
//! colon, trimmed, and must not be empty. A block whose first line is not a speaker line, or a
//! file with no turns at all, is a [`DataError::File`] naming the file (and the line). A speaker
//! line followed directly by a blank line is an empty turn (the file has 125 of them, where stage
//! business was cut) and contributes no text. Lines inside a turn may end in `:` too (1,540 do).
//!
//! ## Clients, sequences and the split
//! * **A client is a speaking role**: every turn spoken under one name. Tiny Shakespeare is a
//!   concatenation of plays without play boundaries, so a role is a *name across plays*
//!   (`KING HENRY VI` or `First Citizen` gather the turns of several plays), unlike LEAF and TFF,
//!   whose clients are (play, role) pairs from the complete works.
//! * A role's **text** is its non-empty turns joined with `\n` (each turn's lines joined with
//!   `\n`, as in the file).
//! * **Vocabulary**: the sorted set of the characters of the whole file ([`Vocab`]); for the
//!   original file 65 characters (`\n`, space, punctuation, `3`, `A–Z`, `a–z`).
//! * **Sequences**: a role's text `c_0 … c_{n−1}` is cut into `m = ⌊(n − 1)/L⌋` non-overlapping
//!   sequences of `L = seq_len` input characters; sequence `k` has inputs `c_{kL} … c_{kL+L−1}` and
//!   targets the next characters `c_{kL+1} … c_{kL+L}` (a [`Shard::tokens`] row). The tail of fewer
//!   than `L + 1` characters is unused.
//! * **Split**: per role, the last `⌊m · test_fraction⌋` sequences (the end of the role's text, as
//!   LEAF holds out the last samples of each user) go to one global test shard; the first
//!   `m − ⌊m · test_fraction⌋` stay with the client.
//! * **Small roles**: a role with fewer than `min_sequences` training sequences is dropped
//!   entirely (neither client nor test rows).
//! * Clients are ordered by role name (byte order), so "the first K clients" is deterministic.
//!
//! ## Counts on the original file
//! 1,115,394 characters, 7,222 turns (125 empty) by 309 names. With the defaults
//! (`seq_len = 80`, `test_fraction = 0.2`, `min_sequences = 2`): **232 roles kept** as clients
//! (77 dropped, 43 of them with no complete sequence at all), **10,232 training sequences**
//! (2 to 376 per client; `GLOUCESTER` has the most) and **2,437 test sequences** (counts checked
//! against an independent Python count of the same rules).

use std::collections::BTreeMap;
use std::path::Path;

use crate::datasets::{DataError, Result};
use privfed_learn::LearnError;
use serde::{Deserialize, Serialize};

use super::data::{FederatedData, Shard};

fn data_err(path: &Path, reason: impl Into<String>) -> DataError {
    DataError::File {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// A character vocabulary: the sorted distinct characters of a text, token `i` = `chars()[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    chars: Vec<char>,
    index: BTreeMap<char, u32>,
}

impl Vocab {
    /// The sorted set of the characters of `text`.
    ///
    /// # Errors
    /// An empty text.
    pub fn from_text(text: &str) -> Result<Self> {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        Self::from_chars(chars)
    }

    /// A vocabulary of the given characters (sorted and deduplicated here).
    ///
    /// # Errors
    /// No characters.
    pub fn from_chars(mut chars: Vec<char>) -> Result<Self> {
        chars.sort_unstable();
        chars.dedup();
        if chars.is_empty() {
            return Err(LearnError::Empty("vocabulary").into());
        }
        let index = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        Ok(Self { chars, index })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.chars.len()
    }

    /// Whether the vocabulary is empty (never, for a constructed one).
    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The characters, in token order.
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The token of one character, if it is in the vocabulary.
    pub fn token(&self, c: char) -> Option<u32> {
        self.index.get(&c).copied()
    }

    /// The tokens of `text`.
    ///
    /// # Errors
    /// A character not in the vocabulary ([`LearnError::InvalidLabel`] with its code point).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LearnError> {
        text.chars()
            .map(|c| {
                self.token(c).ok_or_else(|| LearnError::InvalidLabel {
                    label: f64::from(u32::from(c)),
                    reason: format!("character {c:?} is not in the vocabulary"),
                })
            })
            .collect()
    }

    /// The text of `tokens`.
    ///
    /// # Errors
    /// A token `≥ len()`.
    pub fn decode(&self, tokens: &[u32]) -> Result<String, LearnError> {
        tokens
            .iter()
            .map(|&t| {
                self.chars
                    .get(t as usize)
                    .copied()
                    .ok_or_else(|| LearnError::InvalidLabel {
                        label: f64::from(t),
                        reason: format!("token must be < {}", self.len()),
                    })
            })
            .collect()
    }
}

/// One speaker turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The speaker's name (the speaker line without its colon, trimmed).
    pub speaker: String,
    /// The lines spoken, joined with `\n` (empty for an empty turn).
    pub text: String,
    /// 1-based line number of the speaker line.
    pub line: usize,
}

/// Parses speaker turns (format in the [module documentation](self)); `path` only names the file
/// in errors.
///
/// # Errors
/// [`DataError::File`] naming `path`: a block that does not start with a `NAME:` line (with its
/// line number), or no turns at all (an empty or blank file).
pub fn parse_turns(text: &str, path: &Path) -> Result<Vec<Turn>> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut in_turn = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            in_turn = false;
            continue;
        }
        if in_turn {
            if let Some(t) = turns.last_mut() {
                if !t.text.is_empty() {
                    t.text.push('\n');
                }
                t.text.push_str(line);
            }
            continue;
        }
        let name = line.strip_suffix(':').map(str::trim).unwrap_or("");
        if name.is_empty() {
            let shown: String = line.chars().take(60).collect();
            return Err(data_err(
                path,
                format!(
                    "line {}: a turn must start with a speaker line `NAME:`, found {shown:?}",
                    i + 1
                ),
            ));
        }
        turns.push(Turn {
            speaker: name.to_string(),
            text: String::new(),
            line: i + 1,
        });
        in_turn = true;
    }
    if turns.is_empty() {
        return Err(data_err(
            path,
            "no speaker turns (`NAME:` lines) in the file",
        ));
    }
    Ok(turns)
}

/// The parameters of the Shakespeare split, as in a data config (defaults: 80, 2, 0.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShakespeareConfig {
    /// Input characters per sequence (≥ 1).
    pub seq_len: usize,
    /// A role needs at least this many training sequences to be a client (≥ 1).
    pub min_sequences: usize,
    /// Fraction of each role's sequences (its last ones) held out for the test shard, in `(0, 1)`.
    pub test_fraction: f64,
}

impl Default for ShakespeareConfig {
    fn default() -> Self {
        Self {
            seq_len: 80,
            min_sequences: 2,
            test_fraction: 0.2,
        }
    }
}

impl ShakespeareConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// `seq_len` or `min_sequences` zero, `test_fraction` outside `(0, 1)`.
    pub fn validate(&self) -> Result<()> {
        if self.seq_len == 0 {
            return Err(LearnError::invalid("seq_len", 0.0, "must be ≥ 1").into());
        }
        if self.min_sequences == 0 {
            return Err(LearnError::invalid("min_sequences", 0.0, "must be ≥ 1").into());
        }
        if !(self.test_fraction > 0.0 && self.test_fraction < 1.0) {
            return Err(LearnError::invalid(
                "test_fraction",
                self.test_fraction,
                "must be in (0, 1)",
            )
            .into());
        }
        Ok(())
    }
}

/// Federated Shakespeare: the dataset, its vocabulary and the role of each client.
#[derive(Debug, Clone, PartialEq)]
pub struct Shakespeare {
    /// One client per kept role; token rows of `seq_len` with `seq_len` next-character targets.
    pub data: FederatedData,
    /// The character vocabulary (of the whole file).
    pub vocab: Vocab,
    /// The role (speaker name) of each client, in client order.
    pub roles: Vec<String>,
    /// Names in the file, before dropping small roles.
    pub all_roles: usize,
    /// Speaker turns in the file (empty ones included).
    pub turns: usize,
}

/// Builds federated Shakespeare from the text of the file (`path` only names it in errors).
///
/// # Errors
/// As [`parse_turns`] and [`ShakespeareConfig::validate`]; [`DataError::File`] naming `path` when
/// no role keeps `min_sequences` training sequences or no role has a test sequence.
pub fn shakespeare_from_text(
    text: &str,
    path: &Path,
    config: &ShakespeareConfig,
) -> Result<Shakespeare> {
    config.validate()?;
    let turns = parse_turns(text, path)?;
    let vocab = Vocab::from_text(text)?;
    let mut by_role: BTreeMap<&str, String> = BTreeMap::new();
    for t in &turns {
        let s = by_role.entry(t.speaker.as_str()).or_default();
        if t.text.is_empty() {
            continue;
        }
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&t.text);
    }
    let l = config.seq_len;
    let (mut clients, mut roles) = (Vec::new(), Vec::new());
    let (mut test_x, mut test_y) = (Vec::new(), Vec::new());
    for (role, role_text) in &by_role {
        let tokens = vocab.encode(role_text)?;
        let m = tokens.len().saturating_sub(1) / l;
        let n_test = (m as f64 * config.test_fraction).floor() as usize;
        let n_train = m - n_test;
        if n_train < config.min_sequences {
            continue;
        }
        let (mut x, mut y) = (
            Vec::with_capacity(n_train * l),
            Vec::with_capacity(n_train * l),
        );
        for k in 0..m {
            let (xs, ys) = (
                &tokens[k * l..(k + 1) * l],
                &tokens[k * l + 1..(k + 1) * l + 1],
            );
            if k < n_train {
                x.extend_from_slice(xs);
                y.extend_from_slice(ys);
            } else {
                test_x.extend_from_slice(xs);
                test_y.extend_from_slice(ys);
            }
        }
        clients.push(Shard::tokens(l, vocab.len(), x, y)?);
        roles.push((*role).to_string());
    }
    if clients.is_empty() {
        return Err(data_err(
            path,
            format!(
                "no role has {} training sequences of {l} characters",
                config.min_sequences
            ),
        ));
    }
    if test_x.is_empty() {
        return Err(data_err(
            path,
            format!(
                "no role has a test sequence at test_fraction = {}",
                config.test_fraction
            ),
        ));
    }
    let test = Shard::tokens(l, vocab.len(), test_x, test_y)?;
    let data = FederatedData::new(format!("shakespeare/roles/seq{l}"), clients, test)?;
    Ok(Shakespeare {
        data,
        vocab,
        roles,
        all_roles: by_role.len(),
        turns: turns.len(),
    })
}

/// Federated Shakespeare from `data_dir/tinyshakespeare/input.txt` (see the
/// [module documentation](self)).
///
/// # Errors
/// [`DataError::File`] naming the file when it cannot be read or is not UTF-8; as
/// [`shakespeare_from_text`].
pub fn shakespeare(data_dir: &Path, config: &ShakespeareConfig) -> Result<Shakespeare> {
    let path = data_dir.join("tinyshakespeare").join("input.txt");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| data_err(&path, format!("cannot read as UTF-8 text: {e}")))?;
    shakespeare_from_text(&text, &path, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::RowKind;
    use privfed_testkit::shared_data;

    const SMALL: &str = "ALICE:\nabcdefghij\nklm\n\nBOB:\nxyz\n\nALICE:\nnopq\n\nCAROL:\n\n";

    #[test]
    fn turns_roles_sequences_and_split_on_a_small_text() {
        let p = Path::new("small.txt");
        let turns = parse_turns(SMALL, p).unwrap();
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[0].speaker, "ALICE");
        assert_eq!(turns[0].text, "abcdefghij\nklm");
        assert_eq!(turns[3].line, 11);
        assert_eq!(turns[3].text, "");
        let cfg = ShakespeareConfig {
            seq_len: 3,
            min_sequences: 1,
            test_fraction: 0.25,
        };
        let s = shakespeare_from_text(SMALL, p, &cfg).unwrap();
        // ALICE: "abcdefghij\nklm\nnopq" (19 chars) → 6 sequences, 1 test; BOB: "xyz" → 0
        // sequences (dropped); CAROL: no text (dropped).
        assert_eq!(s.roles, ["ALICE"]);
        assert_eq!((s.all_roles, s.turns), (3, 4));
        assert_eq!(
            s.data.kind,
            RowKind::Tokens {
                len: 3,
                vocab: s.vocab.len()
            }
        );
        let alice = &s.data.clients[0];
        assert_eq!(alice.rows(), 5);
        let b = alice.range(1, 2);
        let x = match b.inputs {
            privfed_learn::nn::Inputs::Tokens { x, .. } => x,
            _ => unreachable!(),
        };
        assert_eq!(s.vocab.decode(x).unwrap(), "def");
        assert_eq!(s.vocab.decode(b.targets).unwrap(), "efg");
        assert_eq!(s.data.test.rows(), 1);
        assert_eq!(s.vocab.decode(s.data.test.targets()).unwrap(), "opq");
        // The vocabulary is the file's sorted character set (names and colons included).
        let v: String = s.vocab.chars().iter().collect();
        assert_eq!(v, "\n:ABCEILORabcdefghijklmnopqxyz");
        assert!(s.vocab.encode("é").is_err());
        assert!(s.vocab.decode(&[99]).is_err());
        // Too strict a minimum drops every role; bad parameters name the field.
        let e = shakespeare_from_text(
            SMALL,
            p,
            &ShakespeareConfig {
                min_sequences: 9,
                ..cfg
            },
        )
        .unwrap_err();
        assert!(
            matches!(&e, DataError::File { path, .. } if path == "small.txt"),
            "{e}"
        );
        for (bad, field) in [
            (ShakespeareConfig { seq_len: 0, ..cfg }, "seq_len"),
            (
                ShakespeareConfig {
                    min_sequences: 0,
                    ..cfg
                },
                "min_sequences",
            ),
            (
                ShakespeareConfig {
                    test_fraction: 1.0,
                    ..cfg
                },
                "test_fraction",
            ),
            (
                ShakespeareConfig {
                    test_fraction: f64::NAN,
                    ..cfg
                },
                "test_fraction",
            ),
        ] {
            let e = shakespeare_from_text(SMALL, p, &bad).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    #[test]
    fn malformed_texts_are_typed_errors_naming_the_file() {
        let p = Path::new("bad/input.txt");
        for (text, needle) in [
            ("", "no speaker turns"),
            ("\n  \n\n", "no speaker turns"),
            (
                "just some prose\nwith no speakers\n",
                "line 1: a turn must start",
            ),
            ("A:\nhi\n\nthen prose\n", "line 4: a turn must start"),
            (":\nnameless\n", "line 1: a turn must start"),
        ] {
            let e = parse_turns(text, p).unwrap_err();
            assert!(
                matches!(&e, DataError::File { path, reason } if path == "bad/input.txt" && reason.contains(needle)),
                "{text:?}: {e}"
            );
        }
        let e = shakespeare(Path::new("/nonexistent"), &ShakespeareConfig::default()).unwrap_err();
        assert!(e.to_string().contains("tinyshakespeare/input.txt"), "{e}");
        assert!(Vocab::from_text("").is_err());
    }

    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult, tinyshakespeare) not found beside the repository"
    )]
    fn tiny_shakespeare_by_role() {
        let s = shakespeare(&shared_data(), &ShakespeareConfig::default()).unwrap();
        assert_eq!(s.vocab.len(), 65);
        assert_eq!((s.turns, s.all_roles), (7_222, 309));
        // Counted independently (a Python script applying the rules of the module docs).
        assert_eq!(s.roles.len(), 232);
        let train: usize = s.data.train_rows();
        assert_eq!((train, s.data.test.rows()), (10_232, 2_437));
        assert_eq!(s.data.kind, RowKind::Tokens { len: 80, vocab: 65 });
        assert!(s.roles.windows(2).all(|w| w[0] < w[1]));
        assert!(s.data.clients.iter().all(|c| c.rows() >= 2));
        // Every character of the file is accounted for: kept sequences are at most the text.
        assert!((train + s.data.test.rows()) * 80 < 1_115_394);
        let gl = s.roles.iter().position(|r| r == "GLOUCESTER").unwrap();
        // GLOUCESTER's text is 37,615 characters: ⌊37614/80⌋ = 470 sequences, 94 held out.
        assert_eq!(s.data.clients[gl].rows(), 470 - 94);
    }
}
