//! The measurements of the two messaging workloads: hackbench over socketpairs and over pipes,
//! and pipe-based context switching; their tables, plots and summary lines.

use std::cell::RefCell;
use std::path::PathBuf;

use idspace::sched::{Placement, Policy, DEFAULT_POLLER};

use super::channel::{TokioPipe, TokioSocketpair};
use super::kernel::{self, OsSocketpair};
use super::ours::{OursPipe, OursSocketpair};
use super::runner::Runtime;
use super::summary::{best_policy, poller_line, Goal, Goals};
use super::tools::{self, Mode};
use super::{
    reciprocals, runtimes, wakelist_share, workloads, Plan, Subject, HACKBENCH_T, KERNEL, LOCKED,
    OURS_DEFAULT, TOKIO,
};
use crate::declare::{Axes, Measurement, Produced, Sweep, Swept};
use crate::model::Row;
use crate::sys::pipe::OsPipe;

/// The file descriptors a workload moves its bytes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fds {
    Socketpairs,
    Pipes,
}

impl Fds {
    fn name(self) -> &'static str {
        match self {
            Fds::Socketpairs => "socketpairs",
            Fds::Pipes => "pipes",
        }
    }
}

/// Metrics of a messaging run: its figure, then the wakelist share (ours only).
const FIGURE: usize = 0;
const SHARE: usize = 1;

/// The hackbench tables (socketpairs, then pipes) and the context-switching table.
pub(super) fn measurements<'a>(
    plan: &Plan,
    workers: usize,
    tool: Option<&PathBuf>,
    goals: &'a RefCell<Goals>,
) -> Vec<Box<dyn Measurement + 'a>> {
    let mut all: Vec<_> = [Fds::Socketpairs, Fds::Pipes]
        .into_iter()
        .map(|fds| hackbench(plan, fds, workers, tool.cloned(), goals))
        .collect();
    all.push(switch(plan.switches, workers, goals));
    all
}

/// Our runtime as `subject` configures it: a policy with forced-remote placement, or the
/// default build.
fn ours(subject: &Subject) -> Runtime {
    match *subject {
        Subject::Ours(policy) => Runtime::Ours(policy, Placement::Remote, DEFAULT_POLLER),
        Subject::OursPoller(poller) => Runtime::Ours(Policy::Wakelist, Placement::Kernel, poller),
        _ => Runtime::Ours(Policy::Wakelist, Placement::Kernel, DEFAULT_POLLER),
    }
}

/// One hackbench run of `subject`: seconds, and the wakelist share.
fn hackbench_run(
    subject: &Subject,
    fds: Fds,
    (groups, loops): (usize, usize),
    workers: usize,
    tool: Option<&PathBuf>,
) -> Result<Vec<f64>, String> {
    let ran = match (*subject, fds) {
        (Subject::Hackbench(mode), _) => {
            let Some(tool) = tool else {
                return Ok(vec![f64::NAN; 2]);
            };
            let seconds = tools::hackbench(tool, mode, fds == Fds::Pipes, groups, loops)?;
            return Ok(vec![seconds, f64::NAN]);
        }
        (Subject::Ours(_) | Subject::OursDefault | Subject::OursPoller(_), Fds::Socketpairs) => {
            ours(subject).run(workers, move || {
                workloads::hackbench::<OursSocketpair>(groups, loops)
            })?
        }
        (Subject::Ours(_) | Subject::OursDefault | Subject::OursPoller(_), Fds::Pipes) => {
            ours(subject).run(workers, move || {
                workloads::hackbench::<OursPipe>(groups, loops)
            })?
        }
        (Subject::Tokio, Fds::Socketpairs) => Runtime::Tokio.run(workers, move || {
            workloads::hackbench::<TokioSocketpair>(groups, loops)
        })?,
        (Subject::Tokio, Fds::Pipes) => Runtime::Tokio.run(workers, move || {
            workloads::hackbench::<TokioPipe>(groups, loops)
        })?,
        (Subject::Kernel, Fds::Socketpairs) => kernel::hackbench::<OsSocketpair>(groups, loops)?,
        (Subject::Kernel, Fds::Pipes) => kernel::hackbench::<OsPipe>(groups, loops)?,
        (Subject::Mio, _) => return Err("the mio loop serves HTTP only".into()),
    };
    Ok(vec![
        ran.elapsed.as_secs_f64(),
        wakelist_share(ran.stats.as_ref()),
    ])
}

fn hackbench_subjects() -> Vec<Subject> {
    let mut all = runtimes();
    all.extend([
        Subject::Kernel,
        Subject::Hackbench(Mode::Threads),
        Subject::Hackbench(Mode::Processes),
    ]);
    all
}

fn hackbench<'a>(
    plan: &Plan,
    fds: Fds,
    workers: usize,
    tool: Option<PathBuf>,
    goals: &'a RefCell<Goals>,
) -> Box<dyn Measurement + 'a> {
    let label = move |&(groups, loops): &(usize, usize)| {
        format!("-g {groups} -l {loops} ({} tasks)", groups * 40)
    };
    let mut sweep = Sweep::new(
        hackbench_subjects(),
        plan.hackbench.clone(),
        move |p| format!("hackbench over {}, {}", fds.name(), label(p)),
        move |subject, &point| hackbench_run(subject, fds, point, workers, tool.as_ref()),
    );
    if let Some(repetitions) = plan.hackbench_repetitions {
        sweep = sweep.repetitions(repetitions);
    }
    sweep.tables(move |swept, _| {
        let mut rows = swept.numbers(FIGURE, 3, label);
        for (point, seconds) in swept.values(FIGURE) {
            let speed = reciprocals(&seconds);
            for peer in [LOCKED, TOKIO, KERNEL, HACKBENCH_T] {
                rows.push(Row::ratios(
                    format!("{}: vs {peer}", label(point)),
                    speed.over(peer),
                ));
            }
            hackbench_goals(&mut goals.borrow_mut(), fds, &label(point), &speed);
        }
        rows.extend(share_rows(swept, label));
        let title = format!(
            "hackbench over {}: seconds, lower is better (ratios: the peer's time ÷ the column's, above 1 is faster)",
            fds.name()
        );
        let id = format!("hackbench_{}", fds.name());
        Produced {
            tables: vec![swept.table(id, title, "s", rows)],
            plots: vec![Axes {
                file: format!("io-hackbench-{}.svg", fds.name()),
                title: format!("hackbench over {}", fds.name()),
                x: ("groups (20 senders + 20 receivers each)", false),
                y: ("seconds".into(), true),
            }
            .plot(swept.series(FIGURE, |&(groups, _)| groups as f64))],
        }
    })
}

/// The rows giving the share of our wakeups that went through a wakelist.
fn share_rows<P>(swept: &Swept<P>, label: impl Fn(&P) -> String) -> Vec<Row> {
    swept.numbers(SHARE, 1, |p| {
        format!("{}: % of wakeups through a wakelist", label(p))
    })
}

/// The summary lines of one hackbench point; `speed` is 1 / seconds.
fn hackbench_goals(goals: &mut Goals, fds: Fds, point: &str, speed: &crate::measure::Values) {
    let socketpairs = fds == Fds::Socketpairs;
    let goal = |wanted| {
        if socketpairs {
            Goal::AtLeast(wanted)
        } else {
            Goal::Report
        }
    };
    let prefix = format!("hackbench over {}, {point}", fds.name());
    goals.push(
        format!("{prefix}: wakelist vs locked"),
        crate::stats::ratio(speed.get("wakelist"), speed.get(LOCKED)),
        goal(1.3),
    );
    if let Some((best, fastest)) = best_policy(speed) {
        goals.push(
            format!("{prefix}: {best} (our fastest) vs tokio"),
            crate::stats::ratio(Some(fastest), speed.get(TOKIO)),
            goal(1.2),
        );
        goals.push(
            format!("{prefix}: {best} vs the kernel's hackbench -T"),
            crate::stats::ratio(Some(fastest), speed.get(HACKBENCH_T)),
            Goal::Report,
        );
    }
    poller_line(goals, &prefix, OURS_DEFAULT, speed);
}

/// One context-switching run: round trips per second, and the wakelist share.
fn switch_run(subject: &Subject, rounds: u64, workers: usize) -> Result<Vec<f64>, String> {
    let ran = match *subject {
        Subject::Ours(_) | Subject::OursDefault | Subject::OursPoller(_) => {
            ours(subject).run(workers, move || workloads::switch::<OursPipe>(rounds))?
        }
        Subject::Tokio => {
            Runtime::Tokio.run(workers, move || workloads::switch::<TokioPipe>(rounds))?
        }
        Subject::Kernel => kernel::switch::<OsPipe>(rounds)?,
        Subject::Hackbench(_) | Subject::Mio => return Err("runs no context-switching test".into()),
    };
    Ok(vec![
        rounds as f64 / ran.elapsed.as_secs_f64(),
        wakelist_share(ran.stats.as_ref()),
    ])
}

fn switch<'a>(rounds: u64, workers: usize, goals: &'a RefCell<Goals>) -> Box<dyn Measurement + 'a> {
    let mut subjects = runtimes();
    subjects.push(Subject::Kernel);
    let label = |rounds: &u64| format!("{rounds} round trips, 2 tasks");
    Sweep::new(
        subjects,
        vec![rounds],
        move |p| format!("context switching, {}", label(p)),
        move |subject, &rounds| switch_run(subject, rounds, workers),
    )
    .tables(move |swept, _| {
        let mut rows = swept.numbers(FIGURE, 0, label);
        let speed = swept.only().metric(FIGURE);
        for peer in [LOCKED, TOKIO, KERNEL] {
            rows.push(Row::ratios(format!("vs {peer}"), speed.over(peer)));
        }
        rows.extend(share_rows(swept, label));
        let mut goals = goals.borrow_mut();
        goals.push(
            "pipe context switching: wakelist vs locked".into(),
            crate::stats::ratio(speed.get("wakelist"), speed.get(LOCKED)),
            Goal::AtLeast(1.11),
        );
        if let Some((best, fastest)) = best_policy(&speed) {
            goals.push(
                format!("pipe context switching: {best} (our fastest) vs tokio"),
                crate::stats::ratio(Some(fastest), speed.get(TOKIO)),
                Goal::AtLeast(1.0),
            );
            goals.push(
                format!("pipe context switching: {best} vs the kernel's threads"),
                crate::stats::ratio(Some(fastest), speed.get(KERNEL)),
                Goal::Report,
            );
            poller_line(&mut goals, "pipe context switching", OURS_DEFAULT, &speed);
        }
        let title = "Pipe-based context switching (UnixBench's shape): round trips per second, higher is better";
        swept
            .table("context_switching", title.into(), "round trips/s", rows)
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_sharing_a_full_channel_all_finish() {
        // 20 senders × 60 messages × 100 bytes into one receiver: more than a pipe (64 KiB) or
        // a socketpair holds, so the senders wait on the same writing end at once.
        let subjects = [
            Subject::Ours(Policy::Locked),
            Subject::OursDefault,
            Subject::OursPoller(idspace::sched::Poller::Shared),
            Subject::OursPoller(idspace::sched::Poller::PerWorker),
            Subject::Tokio,
        ];
        for subject in subjects {
            for fds in [Fds::Socketpairs, Fds::Pipes] {
                let metrics = hackbench_run(&subject, fds, (1, 60), 2, None).unwrap();
                assert!(metrics[FIGURE] > 0.0, "{}", fds.name());
            }
        }
    }

    #[test]
    fn every_subject_runs_every_messaging_workload() {
        let tool = tools::locate("hackbench", "rt-tests").ok();
        for subject in hackbench_subjects() {
            for fds in [Fds::Socketpairs, Fds::Pipes] {
                let metrics = hackbench_run(&subject, fds, (1, 5), 2, tool.as_ref()).unwrap();
                let ours = matches!(
                    subject,
                    Subject::Ours(_) | Subject::OursDefault | Subject::OursPoller(_)
                );
                let ran = tool.is_some() || !matches!(subject, Subject::Hackbench(_));
                assert_eq!(metrics[FIGURE] > 0.0, ran, "{}", fds.name());
                assert_eq!(metrics[SHARE].is_nan(), !ours);
            }
            match subject {
                Subject::Hackbench(_) => assert!(switch_run(&subject, 10, 2).is_err()),
                _ => assert!(switch_run(&subject, 200, 2).unwrap()[FIGURE] > 0.0),
            }
        }
    }
}
