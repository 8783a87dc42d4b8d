//! Character-level language model: embedding → single-layer GRU → dense layer to the vocabulary
//! at every position, trained to predict the next character.
//!
//! A batch holds `B` token sequences of length `T` (row-major `B × T`) and one target per
//! position (the next token; `B × T`, same layout). The loss is softmax cross-entropy averaged
//! over all `B·T` positions; [`Model::evaluate`] counts every position as one prediction.
//!
//! Parameters, in order: the embedding table `E` (`vocab × embed`), the GRU
//! ([`gru`](super::gru): `W_x`, `b_x`, `W_h`, `b_h`), the output layer `W_o` (`vocab × hidden`)
//! and `b_o` (`vocab`). Internally the sequences are processed time-major (row `t·B + b`), so
//! each recurrence step is one matrix product over the batch.

use rand::Rng;

use super::dense::{Dense, Init};
use super::gru::{Gru, GruState};
use super::sequential::MAX_PARAMS;
use super::{
    Batch, Eval, Model, Scratch, check_lengths, check_target, embedding, softmax_xent_in_place,
    tokens,
};
use crate::error::{LearnError, Result};

/// Embedding → GRU → dense-to-vocabulary character model.
#[derive(Debug, Clone, PartialEq)]
pub struct CharGru {
    vocab: usize,
    embed: usize,
    gru: Gru,
}

/// Work buffers of one pass (kept between calls through [`Scratch`]'s buffers).
struct Buffers {
    emb: Vec<f32>,
    state: GruState,
    logits: Vec<f32>,
}

impl CharGru {
    /// A model over `vocab ≥ 2` tokens with `embed`-dimensional embeddings and `hidden` GRU
    /// units.
    ///
    /// # Errors
    /// Sizes out of range, more than 2^28 parameters.
    pub fn new(vocab: usize, embed: usize, hidden: usize) -> Result<Self> {
        if vocab < 2 || vocab > u32::MAX as usize {
            return Err(LearnError::invalid("vocab", vocab as f64, "must be ≥ 2"));
        }
        for (name, v) in [("embed", embed), ("hidden", hidden)] {
            if v == 0 {
                return Err(LearnError::invalid(name, 0.0, "must be ≥ 1"));
            }
        }
        let count = || -> Option<usize> {
            let h3 = hidden.checked_mul(3)?;
            vocab
                .checked_mul(embed)?
                .checked_add(h3.checked_mul(embed.checked_add(hidden)?.checked_add(2)?)?)?
                .checked_add(vocab.checked_mul(hidden.checked_add(1)?)?)
        };
        if count().is_none_or(|c| c > MAX_PARAMS) {
            return Err(LearnError::invalid(
                "hidden",
                hidden as f64,
                format!("model would exceed {MAX_PARAMS} parameters"),
            ));
        }
        Ok(Self {
            vocab,
            embed,
            gru: Gru {
                input: embed,
                hidden,
            },
        })
    }

    fn output(&self) -> Dense {
        Dense {
            inp: self.gru.hidden,
            out: self.vocab,
        }
    }

    /// Offsets of the GRU's and the output layer's parameters.
    fn splits(&self) -> (usize, usize) {
        let e = self.vocab * self.embed;
        (e, e + self.gru.num_params())
    }

    /// Checks everything and returns `(tokens, B, T)`.
    fn check<'a>(&self, params: &[f32], batch: &Batch<'a>) -> Result<(&'a [u32], usize, usize)> {
        check_lengths("params", params.len(), self.num_params())?;
        let (x, rows, len) = tokens(batch, self.vocab)?;
        for &t in batch.targets {
            check_target(t, self.vocab)?;
        }
        Ok((x, rows, len))
    }

    fn take(scratch: &mut Scratch) -> Buffers {
        Buffers {
            emb: scratch.take(0, 0),
            state: GruState {
                gates: scratch.take(1, 0),
                hproj: scratch.take(2, 0),
                hs: scratch.take(3, 0),
            },
            logits: scratch.take(4, 0),
        }
    }

    fn put(scratch: &mut Scratch, b: Buffers) {
        for (i, v) in [b.emb, b.state.gates, b.state.hproj, b.state.hs, b.logits]
            .into_iter()
            .enumerate()
        {
            scratch.put(i, v);
        }
    }

    /// Time-major token order: row `t·B + b` is token `x[b·T + t]`.
    fn time_major(x: &[u32], rows: usize, len: usize) -> impl Iterator<Item = usize> + '_ {
        (0..len).flat_map(move |t| (0..rows).map(move |b| x[b * len + t] as usize))
    }

    /// Forward pass; the logits buffer ends as `softmax − onehot` per position. Returns
    /// `(loss sum, correct)`.
    fn forward(
        &self,
        params: &[f32],
        x: &[u32],
        targets: &[u32],
        rows: usize,
        len: usize,
        buf: &mut Buffers,
    ) -> (f64, u64) {
        let (ge, go) = self.splits();
        let n = rows * len;
        buf.emb.resize(n * self.embed, 0.0);
        embedding::forward(
            &params[..ge],
            self.embed,
            Self::time_major(x, rows, len),
            &mut buf.emb,
        );
        self.gru
            .forward(&params[ge..go], &buf.emb, len, rows, &mut buf.state);
        buf.logits.resize(n * self.vocab, 0.0);
        let h = &buf.state.hs[rows * self.gru.hidden..];
        self.output().forward(&params[go..], h, &mut buf.logits, n);
        let (mut loss, mut correct) = (0.0, 0);
        for (i, row) in buf.logits.chunks_exact_mut(self.vocab).enumerate() {
            let (t, b) = (i / rows, i % rows);
            let (l, ok) = softmax_xent_in_place(row, targets[b * len + t] as usize);
            loss += l;
            correct += ok as u64;
        }
        (loss, correct)
    }
}

impl Model for CharGru {
    fn num_params(&self) -> usize {
        self.vocab * self.embed + self.gru.num_params() + self.output().num_params()
    }

    fn init(&self, rng: &mut dyn Rng) -> Vec<f32> {
        let mut p = vec![0.0; self.num_params()];
        let (ge, go) = self.splits();
        super::dense::init_uniform(&mut p[..ge], Init::Glorot, self.vocab, self.embed, rng);
        self.gru.init(&mut p[ge..go], rng);
        self.output().init(&mut p[go..], Init::Glorot, rng);
        p
    }

    fn loss_grad(
        &self,
        params: &[f32],
        batch: &Batch<'_>,
        grad: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<f64> {
        let (x, rows, len) = self.check(params, batch)?;
        check_lengths("grad", grad.len(), self.num_params())?;
        let mut buf = Self::take(scratch);
        let (loss, _) = self.forward(params, x, batch.targets, rows, len, &mut buf);
        let n = rows * len;
        let inv = 1.0 / n as f32;
        buf.logits.iter_mut().for_each(|d| *d *= inv);
        let (ge, go) = self.splits();
        let (g_emb, rest) = grad.split_at_mut(ge);
        let (g_gru, g_out) = rest.split_at_mut(go - ge);
        let h = self.gru.hidden;
        let mut dhs = scratch.take(5, n * h);
        self.output().backward(
            &params[go..],
            &buf.state.hs[rows * h..],
            &buf.logits,
            g_out,
            Some(&mut dhs),
            n,
        );
        let mut demb = scratch.take(6, n * self.embed);
        let (mut da, mut dc, mut delta) =
            (scratch.take(7, 0), scratch.take(8, 0), scratch.take(9, 0));
        self.gru.backward(
            &params[ge..go],
            &buf.emb,
            len,
            rows,
            &buf.state,
            &dhs,
            g_gru,
            &mut demb,
            &mut da,
            &mut dc,
            &mut delta,
        );
        embedding::backward(g_emb, self.embed, Self::time_major(x, rows, len), &demb);
        for (i, v) in [dhs, demb, da, dc, delta].into_iter().enumerate() {
            scratch.put(5 + i, v);
        }
        Self::put(scratch, buf);
        Ok(loss / n as f64)
    }

    fn evaluate(&self, params: &[f32], batch: &Batch<'_>, scratch: &mut Scratch) -> Result<Eval> {
        let (x, rows, len) = self.check(params, batch)?;
        let mut buf = Self::take(scratch);
        let (loss_sum, correct) = self.forward(params, x, batch.targets, rows, len, &mut buf);
        Self::put(scratch, buf);
        Ok(Eval {
            loss_sum,
            correct,
            count: (rows * len) as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::tests::{check_tokens_model, sgd_lowers_loss, token_batch};
    use crate::nn::{Inputs, ModelSpec};

    #[test]
    fn parameter_count_and_spec() {
        let m = CharGru::new(65, 8, 128).unwrap();
        assert_eq!(m.num_params(), 65 * 8 + 3 * 128 * (8 + 128 + 2) + 65 * 129);
        let spec: ModelSpec =
            serde_json::from_str(r#"{"kind": "char_gru", "vocab": 65, "embed": 8, "hidden": 128}"#)
                .unwrap();
        assert_eq!(spec.build().unwrap().num_params(), m.num_params());
    }

    #[test]
    fn gradient_matches_finite_differences_through_time() {
        // Every parameter of a small model over 3 sequences of 6 steps: embedding, both GRU
        // projections and biases (gates r, z, n), output layer.
        let m = CharGru::new(5, 3, 4).unwrap();
        let (x, y) = token_batch(3, 6, 5, 1);
        check_tokens_model(&m, &x, 6, &y, usize::MAX, 2e-3);
        // The benchmarked size, at sampled coordinates.
        let m = CharGru::new(65, 8, 32).unwrap();
        let (x, y) = token_batch(2, 12, 65, 2);
        check_tokens_model(&m, &x, 12, &y, 200, 2e-3);
    }

    #[test]
    fn sgd_steps_lower_the_loss() {
        // A learnable rule: the next token is the current one plus 1 (mod the vocabulary).
        let m = CharGru::new(10, 4, 16).unwrap();
        let (x, _) = token_batch(4, 20, 10, 3);
        let y: Vec<u32> = x.iter().map(|&t| (t + 1) % 10).collect();
        sgd_lowers_loss(&m, Inputs::Tokens { x: &x, len: 20 }, &y, 0.5);
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let m = CharGru::new(5, 2, 3).unwrap();
        let p = m.init(&mut <rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0));
        let mut s = Scratch::default();
        let mut g = vec![0.0; m.num_params()];
        let x = [0, 1, 2, 3, 4, 0];
        let ok = Batch {
            inputs: Inputs::Tokens { x: &x, len: 3 },
            targets: &[1, 2, 3, 4, 0, 1],
        };
        assert!(m.loss_grad(&p, &ok, &mut g, &mut s).is_ok());
        let e = m.evaluate(&p, &ok, &mut s).unwrap();
        assert_eq!(e.count, 6);
        let bad_token = Batch {
            inputs: Inputs::Tokens {
                x: &[0, 1, 5],
                len: 3,
            },
            targets: &[1, 2, 3],
        };
        assert!(matches!(
            m.evaluate(&p, &bad_token, &mut s),
            Err(LearnError::InvalidLabel { .. })
        ));
        let bad_target = Batch {
            targets: &[1, 2, 3, 4, 0, 5],
            ..ok
        };
        assert!(matches!(
            m.loss_grad(&p, &bad_target, &mut g, &mut s),
            Err(LearnError::InvalidLabel { .. })
        ));
        let one_target_per_row = Batch {
            targets: &[1, 2],
            ..ok
        };
        assert!(matches!(
            m.evaluate(&p, &one_target_per_row, &mut s),
            Err(LearnError::DimensionMismatch { .. })
        ));
        let ragged = Batch {
            inputs: Inputs::Tokens { x: &x[..5], len: 3 },
            targets: &[1, 2, 3, 4, 0],
        };
        assert!(m.evaluate(&p, &ragged, &mut s).is_err());
        let zero_len = Batch {
            inputs: Inputs::Tokens { x: &[], len: 0 },
            targets: &[],
        };
        assert!(m.evaluate(&p, &zero_len, &mut s).is_err());
        let dense = Batch {
            inputs: Inputs::Dense {
                x: &[0.0; 6],
                features: 3,
            },
            targets: &[1, 2],
        };
        assert!(matches!(
            m.evaluate(&p, &dense, &mut s),
            Err(LearnError::Unsupported(_))
        ));
        assert!(m.loss_grad(&p, &ok, &mut g[1..], &mut s).is_err());
        assert!(m.evaluate(&p[1..], &ok, &mut s).is_err());
        assert!(
            CharGru::new(1, 2, 3).is_err()
                && CharGru::new(5, 0, 3).is_err()
                && CharGru::new(5, 2, 0).is_err()
        );
        assert!(CharGru::new(65, 8, 1 << 20).is_err());
    }
}
