//! Settling a failed job: [`crate::retry::plan`] decides its fate; this files it in one atomic step
//! (`fail.lua`) that also removes it from the working list that held it and counts it as processed and
//! failed. A job whose JSON cannot even be read goes to the dead set as it was found.

use redis::ScriptInvocation;

use crate::clock::{float_string, now_f64, utc_date};
use crate::fetch::Unit;
use crate::job::Job;
use crate::keys::{Keys, STATS_TTL_SECS};
use crate::retry::{self, Failure, Fate};
use crate::scripts;

/// A failed job, ready to be filed: its fate, and the job as it will be stored (error fields set).
#[derive(Debug, Clone)]
pub struct Settlement {
    pub fate: Fate,
    pub filed: Vec<u8>,
    pub at: f64,
}

impl Settlement {
    /// Applies Sidekiq's retry rules to a job that raised.
    pub fn of_failure(unit: &Unit, failure: &Failure) -> Settlement {
        let at = now_f64();
        match Job::parse(&unit.raw) {
            Ok(job) => {
                let plan = retry::plan(job, &unit.queue, failure, at);
                Settlement {
                    fate: plan.fate,
                    filed: plan.job.to_json().into_bytes(),
                    at,
                }
            }
            Err(_) => Settlement::burial(unit),
        }
    }

    /// A job that cannot be read at all: to the dead set, byte for byte, as Sidekiq does.
    pub fn burial(unit: &Unit) -> Settlement {
        Settlement {
            fate: Fate::Exhausted { morgue: true },
            filed: unit.raw.clone(),
            at: now_f64(),
        }
    }

    /// The `fail.lua` call that files it and acknowledges `unit`.
    pub fn invocation(&self, keys: &Keys, unit: &Unit) -> ScriptInvocation<'static> {
        self.invocation_of(&scripts::FAIL, keys, unit)
    }

    /// [`Settlement::invocation`] of a script that contains `fail.lua` (a batch's, `batch/`).
    pub fn invocation_of(
        &self,
        script: &'static redis::Script,
        keys: &Keys,
        unit: &Unit,
    ) -> ScriptInvocation<'static> {
        let date = utc_date();
        let (action, target, score) = match self.fate {
            Fate::Retry { at } => ("retry", keys.retry(), at),
            Fate::Exhausted { morgue: true } => ("dead", keys.dead(), self.at),
            _ => ("drop", keys.dead(), self.at),
        };
        let mut inv = script.prepare_invoke();
        inv.key(&*unit.working)
            .key(keys.stat_processed())
            .key(keys.stat_processed_on(&date))
            .key(keys.stat_failed())
            .key(keys.stat_failed_on(&date))
            .key(target)
            .arg(&unit.raw)
            .arg(action)
            .arg(float_string(score))
            .arg(&self.filed)
            .arg(STATS_TTL_SECS)
            .arg(float_string(retry::dead_cutoff(self.at)))
            .arg(retry::DEAD_MAX_JOBS);
        inv
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryIn;

    fn unit(raw: &[u8]) -> Unit {
        Unit::new(0, "default".into(), raw.to_vec(), "w".into())
    }

    fn failure() -> Failure {
        Failure {
            error_class: "RuntimeError".into(),
            error_message: "boom".into(),
            backtrace: vec![],
            retry_in: RetryIn::Default,
            worker_retry: None,
        }
    }

    #[test]
    fn a_readable_job_is_planned_by_the_retry_rules() {
        let s = Settlement::of_failure(
            &unit(br#"{"class":"W","args":[],"jid":"j","retry":true}"#),
            &failure(),
        );
        assert!(matches!(s.fate, Fate::Retry { .. }));
        let filed = String::from_utf8(s.filed).expect("utf-8");
        assert!(filed.contains(r#""error_message":"boom""#), "{filed}");
    }

    #[test]
    fn an_unreadable_job_is_buried_as_it_was() {
        let s = Settlement::of_failure(&unit(b"{oops"), &failure());
        assert_eq!(s.fate, Fate::Exhausted { morgue: true });
        assert_eq!(s.filed, b"{oops");
    }
}
