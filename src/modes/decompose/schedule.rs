//! Scheduling the plan (pure): dependency waves, the cycle fallback, the critical path and the
//! round-robin assignment of workers.

use super::*;

/// Kahn's waves, by index into `tasks`: wave k holds, in plan order, every task not yet
/// scheduled whose dependencies are all in earlier waves. The second list holds the tasks
/// that could not be scheduled (on or behind a cycle). A dependency on an id not in the plan
/// is ignored (a cleaned plan has none).
pub fn waves_of(tasks: &[Task]) -> (Vec<Vec<usize>>, Vec<usize>) {
    let index: HashMap<&str, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut wave_of: Vec<Option<usize>> = vec![None; tasks.len()];
    let mut waves: Vec<Vec<usize>> = Vec::new();
    loop {
        let k = waves.len();
        let ready: Vec<usize> = (0..tasks.len())
            .filter(|&i| wave_of[i].is_none())
            .filter(|&i| {
                tasks[i].dependencies.iter().all(|d| match index.get(d.as_str()) {
                    Some(&j) => wave_of[j].is_some_and(|w| w < k),
                    None => true,
                })
            })
            .collect();
        if ready.is_empty() {
            break;
        }
        for &i in &ready {
            wave_of[i] = Some(k);
        }
        waves.push(ready);
    }
    let left = (0..tasks.len()).filter(|&i| wave_of[i].is_none()).collect();
    (waves, left)
}

/// One dependency the cycle repair dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    pub task_id: String,
    pub dependency: String,
}

/// The plan with every dependency on a task later in plan order dropped: edges then only
/// point backwards, so the graph is acyclic whatever it was.
pub fn drop_forward(tasks: &[Task]) -> (Vec<Task>, Vec<Dropped>) {
    let pos: HashMap<&str, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut dropped = Vec::new();
    let fixed = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = t.clone();
            t.dependencies.retain(|d| {
                let keep = pos.get(d.as_str()).is_none_or(|&j| j < i);
                if !keep {
                    dropped.push(Dropped { task_id: t.id.clone(), dependency: d.clone() });
                }
                keep
            });
            t
        })
        .collect();
    (fixed, dropped)
}

/// The longest chain of dependencies (in tasks), by index: computed in wave order, a task's
/// path is the longest of its dependencies' (tie: the earliest in plan order) plus itself; the
/// longest overall wins (tie: the earliest end task in plan order).
pub fn critical_path(tasks: &[Task], waves: &[Vec<usize>]) -> Vec<usize> {
    let index: HashMap<&str, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
    let mut path: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
    for wave in waves {
        for &i in wave {
            let mut deps: Vec<usize> = tasks[i]
                .dependencies
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect();
            deps.sort_unstable();
            let mut best: Option<usize> = None;
            for j in deps {
                if best.is_none_or(|b| path[j].len() > path[b].len()) {
                    best = Some(j);
                }
            }
            let mut p = best.map(|b| path[b].clone()).unwrap_or_default();
            p.push(i);
            path[i] = p;
        }
    }
    let mut best: Option<usize> = None;
    for i in 0..tasks.len() {
        if best.is_none_or(|b| path[i].len() > path[b].len()) {
            best = Some(i);
        }
    }
    best.map(|b| path[b].clone()).unwrap_or_default()
}

/// Who carries out which task: round-robin over the workers through the waves in order, plan
/// order within a wave, the counter carrying across waves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    pub task_id: String,
    pub model: String,
    pub wave: usize,
}

pub fn assign(tasks: &[Task], waves: &[Vec<usize>], workers: &[String]) -> Vec<Assignment> {
    let mut out = Vec::new();
    if workers.is_empty() {
        return out;
    }
    for (w, wave) in waves.iter().enumerate() {
        for &i in wave {
            out.push(Assignment {
                task_id: tasks[i].id.clone(),
                model: workers[out.len() % workers.len()].clone(),
                wave: w + 1,
            });
        }
    }
    out
}

/// A plan as the server runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub tasks: Vec<Task>,
    /// Ids by wave (wave 1 first).
    pub waves: Vec<Vec<String>>,
    pub critical_path: Vec<String>,
    pub max_parallelism: usize,
    pub dropped: Vec<Dropped>,
}

/// The schedule of a plan; with a cycle, the plan is repaired first when `repair`, else None.
pub fn schedule(tasks: &[Task], repair: bool) -> Option<Schedule> {
    let (waves, left) = waves_of(tasks);
    let (tasks, waves, dropped) = if left.is_empty() {
        (tasks.to_vec(), waves, Vec::new())
    } else if repair {
        let (fixed, dropped) = drop_forward(tasks);
        let (waves, _) = waves_of(&fixed);
        (fixed, waves, dropped)
    } else {
        return None;
    };
    let path = critical_path(&tasks, &waves);
    let ids = |list: &[usize]| list.iter().map(|&i| tasks[i].id.clone()).collect::<Vec<_>>();
    Some(Schedule {
        waves: waves.iter().map(|w| ids(w)).collect(),
        critical_path: ids(&path),
        max_parallelism: waves.iter().map(Vec::len).max().unwrap_or(0),
        dropped,
        tasks,
    })
}

/// The ids of a plan's tasks that cannot be scheduled (on or behind a cycle).
pub fn unschedulable(tasks: &[Task]) -> Vec<String> {
    waves_of(tasks).1.into_iter().map(|i| tasks[i].id.clone()).collect()
}
