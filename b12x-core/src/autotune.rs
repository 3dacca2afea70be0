//! The autotune race, independent of CUDA so it can be tested with a fake timer.
//!
//! Rules (DESIGN.md §3): warm-up, then up to [`ROUNDS`] rounds; in each round every surviving
//! candidate is timed [`SAMPLES_PER_ROUND`] times (L2 flushed before each sample by the timer)
//! and scores the median of its samples; after a round, candidates more than
//! [`ELIMINATION`] behind that round's leader are dropped. The winner has the lowest median of
//! its round scores; ties go to the earlier (default-first) candidate.

use crate::Result;

pub const WARMUP: usize = 2;
pub const ROUNDS: usize = 3;
/// Samples per candidate and round. With 5, the gemv race picked a ring ~0.5 µs (0.8%) slower
/// than the best in 3 of 12 buckets of one call; with 11 in none of 12, and the whole 264 MB
/// gemv bench (five plans' races included) still took 6-7 s
/// (`bench-results/2026-12-01-h200-j/race11/`).
pub const SAMPLES_PER_ROUND: usize = 11;
/// Candidates slower than the leader by more than this fraction are dropped.
pub const ELIMINATION: f64 = 0.10;

/// Median of a non-empty slice (mean of the two middle values for even lengths).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Outcome of a race: winner index and each candidate's score (µs; `None` if eliminated early
/// it still has the median of the rounds it ran).
#[derive(Clone, Debug, PartialEq)]
pub struct RaceResult {
    pub winner: usize,
    pub scores_us: Vec<f64>,
    pub rounds_run: Vec<usize>,
}

/// Races `n` candidates. `warm(i)` runs candidate `i` untimed; `sample(i)` returns one timed
/// sample in µs.
pub fn race(
    n: usize,
    mut warm: impl FnMut(usize) -> Result<()>,
    mut sample: impl FnMut(usize) -> Result<f64>,
) -> Result<RaceResult> {
    let mut alive: Vec<usize> = (0..n).collect();
    let mut round_scores: Vec<Vec<f64>> = vec![Vec::new(); n];
    for &i in &alive {
        for _ in 0..WARMUP {
            warm(i)?;
        }
    }
    for _ in 0..ROUNDS {
        let mut this_round = Vec::with_capacity(alive.len());
        for &i in &alive {
            let mut s = Vec::with_capacity(SAMPLES_PER_ROUND);
            for _ in 0..SAMPLES_PER_ROUND {
                s.push(sample(i)?);
            }
            let m = median(&s);
            round_scores[i].push(m);
            this_round.push((i, m));
        }
        let best = this_round.iter().map(|&(_, m)| m).fold(f64::INFINITY, f64::min);
        alive.retain(|&i| {
            let m = *round_scores[i].last().unwrap_or(&f64::INFINITY);
            m <= best * (1.0 + ELIMINATION)
        });
        if alive.len() <= 1 {
            break;
        }
    }
    let scores_us: Vec<f64> =
        round_scores.iter().map(|r| if r.is_empty() { f64::INFINITY } else { median(r) }).collect();
    let winner =
        alive.iter().copied().min_by(|&a, &b| scores_us[a].total_cmp(&scores_us[b]).then(a.cmp(&b))).unwrap_or(0);
    Ok(RaceResult { winner, scores_us, rounds_run: round_scores.iter().map(Vec::len).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_handles_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn slow_candidates_are_eliminated_after_one_round() {
        let times = [10.0, 9.0, 20.0, 9.5];
        let mut warmed = vec![0; 4];
        let r = race(
            4,
            |i| {
                warmed[i] += 1;
                Ok(())
            },
            |i| Ok(times[i]),
        )
        .unwrap();
        assert_eq!(r.winner, 1);
        assert_eq!(warmed, vec![WARMUP; 4]);
        // 20 is > 10% behind 9 and 10 is 11% behind: both run a single round.
        assert_eq!(r.rounds_run, vec![1, ROUNDS, 1, ROUNDS]);
    }

    #[test]
    fn noise_is_absorbed_by_medians() {
        // Candidate 0 has one terrible outlier per round; its median still wins.
        let mut k = 0usize;
        let r = race(
            2,
            |_| Ok(()),
            |i| {
                k += 1;
                Ok(if i == 0 {
                    if k % 5 == 0 {
                        1000.0
                    } else {
                        5.0
                    }
                } else {
                    6.0
                })
            },
        )
        .unwrap();
        assert_eq!(r.winner, 0);
    }

    #[test]
    fn ties_go_to_the_default() {
        let r = race(3, |_| Ok(()), |_| Ok(7.0)).unwrap();
        assert_eq!(r.winner, 0);
    }
}
