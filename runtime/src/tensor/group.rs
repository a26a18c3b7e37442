//! Process groups (issue 11): the ranks of a group are devices of one client,
//! each driven by its own thread, and may run different code between
//! collectives (MPMD). A collective cuts the calling rank's stream (it is
//! always a program of its own, whatever the fuser's window holds), then
//! meets the other ranks at a rendezvous. When every rank has arrived with
//! the same collective, the last to arrive launches one execution spanning
//! the group's devices, once every rank's input is computed and no device
//! has a long queue, so XLA's own rendezvous (which aborts the process when
//! a replica waits 40 s) never waits for long. A mismatch, or a
//! rank that does not arrive within the timeout, fails every rank with an
//! error naming each rank's call and the line that made it; the process goes
//! on.

use std::panic::Location;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use fusion::policy::CutReason;
use fusion::{Collective, CollectiveReduce, Graph, Op, ReplicaGroups, TensorType};

use super::{Device, Tensor};
use crate::completion::{Blame, Completion};
use crate::context::{self, Runtime};
use crate::error::{Error, Result};
use crate::lock;
use crate::metrics::Counters;
use crate::origin::Origin;
use crate::pjrt::Buffer;
use crate::value::Value;

/// The executions a device may have in flight when a collective launches
/// on it: below the XLA CPU client's bound per device (32), with room for
/// the collective itself.
const COLLECTIVE_LAUNCH_QUEUE: usize = 16;

/// A group of ranks, rank `r` on device `devices[r]`. Cloning shares the
/// group (one clone per rank thread).
#[derive(Clone)]
pub struct ProcessGroup {
    inner: Arc<Group>,
}

/// A group's ranks split into subgroups of one size, each collective run
/// within every subgroup at once, as one program (XLA's replica groups list
/// every subgroup): every rank of the group calls it, and exchanges values
/// with the ranks of its own subgroup only (tensor parallelism within pairs,
/// data parallelism across them). Made by [`ProcessGroup::split`].
#[derive(Clone)]
pub struct Subgroups {
    group: ProcessGroup,
    groups: ReplicaGroups,
}

struct Group {
    devices: Vec<Device>,
    timeout: Duration,
    /// The collective being gathered.
    current: Mutex<Arc<Round>>,
    /// Each rank's collectives called, and the last it finished (for errors).
    ranks: Mutex<Vec<RankLog>>,
}

#[derive(Default, Clone)]
struct RankLog {
    called: u64,
    finished: Option<String>,
    /// The rank said it calls no more collectives ([`ProcessGroup::leave`]).
    left: bool,
}

/// One collective of the group: each rank's call, then the outcome.
struct Round {
    state: Mutex<RoundState>,
    arrived: Condvar,
}

struct RoundState {
    calls: Vec<Option<Call>>,
    /// Each rank's result, or the error every rank gets.
    outcome: Option<Result<Vec<Arc<Value>>>>,
}

/// What a rank asked for.
struct Call {
    collective: Collective,
    ty: TensorType,
    /// The rank's count of collectives, this one included.
    number: u64,
    origin: Origin,
    /// When the rank arrived.
    since: Instant,
    value: Arc<Value>,
    /// Why the rank's stream could not run what it recorded before the
    /// collective (the rank still comes to the rendezvous, so that the
    /// others fail at once instead of at the timeout).
    failed: Option<Error>,
}

impl Call {
    /// `all_reduce(Sum) float32[4] (collective #3) at train.py:12`, naming the
    /// subgroups when there are several.
    fn describe(&self) -> String {
        let what = match &self.collective {
            Collective::AllReduce { op, .. } => format!("all_reduce({op:?})"),
            Collective::AllGather { dim, .. } => format!("all_gather(dim {dim})"),
            Collective::Broadcast { root, .. } => format!("broadcast(root {root})"),
            Collective::ReduceScatter { op, dim, .. } => {
                format!("reduce_scatter({op:?}, dim {dim})")
            }
            Collective::AllToAll {
                split_dim,
                concat_dim,
                ..
            } => format!("all_to_all(split dim {split_dim}, concat dim {concat_dim})"),
        };
        let groups = self.collective.groups().groups();
        let within = if groups.len() > 1 {
            format!(" within subgroups {groups:?}")
        } else {
            String::new()
        };
        format!(
            "{what}{within} {} (collective #{}) at {}",
            self.ty, self.number, self.origin
        )
    }
}

impl Round {
    fn new(ranks: usize) -> Arc<Round> {
        Arc::new(Round {
            state: Mutex::new(RoundState {
                calls: (0..ranks).map(|_| None).collect(),
                outcome: None,
            }),
            arrived: Condvar::new(),
        })
    }
}

/// Every group alive, for the report of where ranks wait.
static GROUPS: Mutex<Vec<Weak<Group>>> = Mutex::new(Vec::new());

/// Where ranks wait now, one line per group with a collective some of its
/// ranks have come to: each waiting rank's call, its line and how long it
/// has waited, and the ranks still missing with the last collective each
/// finished (`Metrics::collectives_waiting`).
pub(crate) fn waiting() -> Vec<String> {
    let groups: Vec<Arc<Group>> = {
        let mut all = lock(&GROUPS);
        all.retain(|g| g.strong_count() > 0);
        all.iter().filter_map(Weak::upgrade).collect()
    };
    groups.iter().filter_map(|g| g.waiting()).collect()
}

impl Group {
    fn waiting(&self) -> Option<String> {
        let round = lock(&self.current).clone();
        let state = lock(&round.state);
        if state.outcome.is_some() || state.calls.iter().all(Option::is_none) {
            return None;
        }
        let ranks = lock(&self.ranks).clone();
        let devices: Vec<String> = self.devices.iter().map(|d| d.index().to_string()).collect();
        let (waiting, missing) = describe_ranks(&state.calls, &ranks);
        Some(format!(
            "group on devices [{}]: {}; missing: {}",
            devices.join(", "),
            waiting
                .iter()
                .zip(state.calls.iter().flatten())
                .map(|(w, c)| format!("{w}, waiting {:.1} s", c.since.elapsed().as_secs_f64()))
                .collect::<Vec<_>>()
                .join("; "),
            missing.join(", ")
        ))
    }
}

/// Each rank that came to a round (`rank r: <call>`), and each that did
/// not (`rank r (last finished: <call>)`).
fn describe_ranks(calls: &[Option<Call>], ranks: &[RankLog]) -> (Vec<String>, Vec<String>) {
    let waiting = calls
        .iter()
        .enumerate()
        .filter_map(|(r, c)| c.as_ref().map(|c| format!("rank {r}: {}", c.describe())))
        .collect();
    let missing = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_none())
        .map(|(r, _)| missing_rank(r, ranks))
        .collect();
    (waiting, missing)
}

/// `rank r (last finished: <call>)`.
fn missing_rank(r: usize, ranks: &[RankLog]) -> String {
    format!(
        "rank {r} (last finished: {})",
        ranks[r].finished.as_deref().unwrap_or("no collective")
    )
}

/// The name of the collective a round's ranks called.
fn round_op(calls: &[Option<Call>]) -> &'static str {
    calls
        .iter()
        .flatten()
        .next()
        .map_or("collective", |c| c.collective.name())
}

fn invalid(op: &'static str, message: String) -> Error {
    fusion::Error::Invalid { op, message }.into()
}

impl ProcessGroup {
    /// A group whose rank `r` runs on `devices[r]`; a collective waits
    /// `EAGERTPU_COLLECTIVE_TIMEOUT` (default 300 s) for every rank.
    pub fn new(devices: &[Device]) -> Result<ProcessGroup> {
        let rt = context::get()?;
        ProcessGroup::with_timeout(devices, rt.collective_timeout)
    }

    /// A group whose collectives fail every rank when one has not arrived
    /// after `timeout`.
    pub fn with_timeout(devices: &[Device], timeout: Duration) -> Result<ProcessGroup> {
        if devices.is_empty() {
            return Err(invalid(
                "process_group",
                "got no devices; expected one device per rank".into(),
            ));
        }
        for (r, d) in devices.iter().enumerate() {
            if let Some(first) = devices[..r].iter().position(|e| e == d) {
                return Err(invalid(
                    "process_group",
                    format!(
                        "ranks {first} and {r} are both on device {}; expected one device per rank",
                        d.index()
                    ),
                ));
            }
        }
        let inner = Arc::new(Group {
            devices: devices.to_vec(),
            timeout,
            current: Mutex::new(Round::new(devices.len())),
            ranks: Mutex::new(vec![RankLog::default(); devices.len()]),
        });
        lock(&GROUPS).push(Arc::downgrade(&inner));
        Ok(ProcessGroup { inner })
    }

    pub fn size(&self) -> usize {
        self.inner.devices.len()
    }

    /// Rank `rank` calls no more collectives of this group (its thread is
    /// done, or failed): a collective the others wait for, or call later,
    /// fails at once with an error naming it, instead of at the timeout.
    /// The C ABI calls this when a rank frees its group handle.
    pub fn leave(&self, rank: usize) -> Result<()> {
        self.rank_device("process_group", rank)?;
        lock(&self.inner.ranks)[rank].left = true;
        let rt = context::get()?;
        let round = lock(&self.inner.current).clone();
        self.fail_if_left(rt, &round, &mut lock(&round.state));
        Ok(())
    }

    /// Rank `rank`'s device.
    pub fn device(&self, rank: usize) -> Option<Device> {
        self.inner.devices.get(rank).copied()
    }

    /// Rank `rank`'s device, or an error naming `op` for a rank outside the
    /// group.
    fn rank_device(&self, op: &'static str, rank: usize) -> Result<Device> {
        self.device(rank).ok_or_else(|| {
            invalid(
                op,
                format!("got rank {rank}; expected a rank in 0..{}", self.size()),
            )
        })
    }

    fn all(&self) -> ReplicaGroups {
        ReplicaGroups::all(self.size() as u32)
    }

    /// The group's ranks split into `partition`'s subgroups: every rank of
    /// the group exactly once, in subgroups of one size (`[[0, 2], [1, 3]]`).
    pub fn split(&self, partition: &[Vec<usize>]) -> Result<Subgroups> {
        let as_u32 = |r: usize| u32::try_from(r).unwrap_or(u32::MAX);
        let groups = partition
            .iter()
            .map(|g| g.iter().map(|&r| as_u32(r)).collect())
            .collect();
        let groups = ReplicaGroups::new("split", groups)?;
        if groups.replicas() != self.size() {
            return Err(invalid(
                "split",
                format!(
                    "got subgroups {partition:?} of {} ranks; expected every rank of the group's {}",
                    groups.replicas(),
                    self.size()
                ),
            ));
        }
        Ok(Subgroups {
            group: self.clone(),
            groups,
        })
    }

    /// Every rank gets the reduction of all ranks' `x`.
    #[track_caller]
    pub fn all_reduce(&self, rank: usize, x: &Tensor, op: CollectiveReduce) -> Result<Tensor> {
        self.all_reduce_in(rank, x, op, self.all())
    }

    #[track_caller]
    fn all_reduce_in(
        &self,
        rank: usize,
        x: &Tensor,
        op: CollectiveReduce,
        groups: ReplicaGroups,
    ) -> Result<Tensor> {
        self.collective(rank, x, Collective::AllReduce { op, groups })
    }

    /// Every rank gets rank `root`'s `x`, bit for bit (every rank passes a
    /// tensor of that type: the others' values are not read).
    #[track_caller]
    pub fn broadcast(&self, rank: usize, x: &Tensor, root: usize) -> Result<Tensor> {
        self.broadcast_in(rank, x, root, self.all())
    }

    #[track_caller]
    fn broadcast_in(
        &self,
        rank: usize,
        x: &Tensor,
        root: usize,
        groups: ReplicaGroups,
    ) -> Result<Tensor> {
        let root = u32::try_from(root).unwrap_or(u32::MAX);
        self.collective(rank, x, Collective::Broadcast { root, groups })
    }

    /// Returns once every rank has called it and this rank's own earlier
    /// work has run (as `torch.distributed.barrier` on a device backend).
    #[track_caller]
    pub fn barrier(&self, rank: usize) -> Result<()> {
        let device = self.rank_device("barrier", rank)?;
        let token = device.tensor(&[0i32], &[])?;
        let groups = self.all();
        let all = Collective::AllReduce {
            op: CollectiveReduce::Sum,
            groups,
        };
        self.collective(rank, &token, all)?.sync()?;
        device.stream.sync(context::get()?)
    }

    /// Every rank gets all ranks' `x` concatenated along `dim`, in rank order.
    #[track_caller]
    pub fn all_gather(&self, rank: usize, x: &Tensor, dim: i64) -> Result<Tensor> {
        self.all_gather_in(rank, x, dim, self.all())
    }

    #[track_caller]
    fn all_gather_in(
        &self,
        rank: usize,
        x: &Tensor,
        dim: i64,
        groups: ReplicaGroups,
    ) -> Result<Tensor> {
        let dim = fusion::shape::normalize_dim("all_gather", dim, x.rank())?;
        self.collective(rank, x, Collective::AllGather { dim, groups })
    }

    /// The reduction of all ranks' `x`, split along `dim` into one block per
    /// rank: rank `r` gets block `r`.
    #[track_caller]
    pub fn reduce_scatter(
        &self,
        rank: usize,
        x: &Tensor,
        op: CollectiveReduce,
        dim: i64,
    ) -> Result<Tensor> {
        self.reduce_scatter_in(rank, x, op, dim, self.all())
    }

    #[track_caller]
    fn reduce_scatter_in(
        &self,
        rank: usize,
        x: &Tensor,
        op: CollectiveReduce,
        dim: i64,
        groups: ReplicaGroups,
    ) -> Result<Tensor> {
        let dim = fusion::shape::normalize_dim("reduce_scatter", dim, x.rank())?;
        self.collective(rank, x, Collective::ReduceScatter { op, dim, groups })
    }

    /// Each rank splits `x` along `split_dim` into one block per rank, sends
    /// block `k` to rank `k`, and concatenates what it receives along
    /// `concat_dim`, in rank order.
    #[track_caller]
    pub fn all_to_all(
        &self,
        rank: usize,
        x: &Tensor,
        split_dim: i64,
        concat_dim: i64,
    ) -> Result<Tensor> {
        self.all_to_all_in(rank, x, split_dim, concat_dim, self.all())
    }

    #[track_caller]
    fn all_to_all_in(
        &self,
        rank: usize,
        x: &Tensor,
        split_dim: i64,
        concat_dim: i64,
        groups: ReplicaGroups,
    ) -> Result<Tensor> {
        let split_dim = fusion::shape::normalize_dim("all_to_all", split_dim, x.rank())?;
        let concat_dim = fusion::shape::normalize_dim("all_to_all", concat_dim, x.rank())?;
        let c = Collective::AllToAll {
            split_dim,
            concat_dim,
            groups,
        };
        self.collective(rank, x, c)
    }

    #[track_caller]
    fn collective(&self, rank: usize, x: &Tensor, collective: Collective) -> Result<Tensor> {
        let origin = crate::origin::current(Location::caller());
        let rt = context::get()?;
        let op = collective.name();
        let device = self.rank_device(op, rank)?;
        if x.device() != device {
            return Err(invalid(
                op,
                format!(
                    "rank {rank} passed a tensor on device {}; expected one on its device {}",
                    x.device().index(),
                    device.index()
                ),
            ));
        }
        // A collective is a program of its own: what the rank recorded before
        // it runs first, whatever the fuser's window held.
        let failed = x.stream.cut(rt, CutReason::Unfusible).err();
        let number = {
            let mut ranks = lock(&self.inner.ranks);
            ranks[rank].called += 1;
            ranks[rank].called
        };
        let call = Call {
            collective,
            ty: x.ty().clone(),
            number,
            origin,
            since: Instant::now(),
            value: x.value.clone(),
            failed,
        };
        let described = call.describe();
        let outcome = self.meet(rt, rank, call);
        if outcome.is_ok() {
            lock(&self.inner.ranks)[rank].finished = Some(described);
        }
        outcome.map(|values| Tensor::new(values[rank].clone(), device.stream))
    }

    /// Leaves `call` at the current round and waits for the round's
    /// outcome; the last rank to arrive runs the collective.
    fn meet(&self, rt: &Runtime, rank: usize, call: Call) -> Result<Vec<Arc<Value>>> {
        let round = lock(&self.inner.current).clone();
        let mut state = lock(&round.state);
        state.calls[rank] = Some(call);
        // A rank late to a round that already failed (timed out) gets its
        // error; the others have gone.
        self.fail_if_left(rt, &round, &mut state);
        if state.outcome.is_none() && state.calls.iter().all(Option::is_some) {
            let outcome = self.run(rt, &state.calls);
            if outcome.is_err() {
                Counters::add(&rt.counters.collective_errors, 1);
            }
            state.outcome = Some(outcome);
            self.next_round(&round);
            round.arrived.notify_all();
        }
        let deadline = Instant::now() + self.inner.timeout;
        while state.outcome.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let error = self.timed_out(&state.calls);
                self.end_round(rt, &round, &mut state, error);
                break;
            }
            state = round
                .arrived
                .wait_timeout(state, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        state.outcome.clone().unwrap_or_else(|| {
            Err(Error::Internal(
                "a collective round ended without an outcome".into(),
            ))
        })
    }

    /// Ends `round` with an error when a rank that has not come to it left
    /// the group: it never will, so the ranks waiting need not wait for the
    /// timeout.
    fn fail_if_left(&self, rt: &Runtime, round: &Arc<Round>, state: &mut RoundState) {
        if state.outcome.is_some() || state.calls.iter().all(Option::is_none) {
            return;
        }
        let ranks = lock(&self.inner.ranks).clone();
        let gone: Vec<String> = (0..state.calls.len())
            .filter(|&r| state.calls[r].is_none() && ranks[r].left)
            .map(|r| missing_rank(r, &ranks))
            .collect();
        if gone.is_empty() {
            return;
        }
        let (waiting, _) = describe_ranks(&state.calls, &ranks);
        let error = invalid(
            round_op(&state.calls),
            format!(
                "{} left the group (its process group was destroyed or its thread ended) and \
                 will not come to this collective; waiting: {}",
                gone.join(", "),
                waiting.join("; ")
            ),
        );
        self.end_round(rt, round, state, error);
    }

    /// Ends `round` with `error` for every rank, and starts the next.
    fn end_round(&self, rt: &Runtime, round: &Arc<Round>, state: &mut RoundState, error: Error) {
        state.outcome = Some(Err(error));
        Counters::add(&rt.counters.collective_errors, 1);
        self.next_round(round);
        round.arrived.notify_all();
    }

    /// Starts the next round, unless another rank already did.
    fn next_round(&self, finished: &Arc<Round>) {
        let mut current = lock(&self.inner.current);
        if Arc::ptr_eq(&current, finished) {
            *current = Round::new(self.size());
        }
    }

    /// The error of a round some ranks did not come to.
    fn timed_out(&self, calls: &[Option<Call>]) -> Error {
        let ranks = lock(&self.inner.ranks).clone();
        let (waiting, missing) = describe_ranks(calls, &ranks);
        invalid(
            round_op(calls),
            format!(
                "timed out after {:?} waiting for {} of {} ranks: {}; waiting: {}",
                self.inner.timeout,
                missing.len(),
                calls.len(),
                missing.join(", "),
                waiting.join("; ")
            ),
        )
    }

    /// Runs the collective every rank called, as one execution spanning the
    /// group's devices: each rank's result value.
    fn run(&self, rt: &Runtime, calls: &[Option<Call>]) -> Result<Vec<Arc<Value>>> {
        let calls: Vec<&Call> = calls.iter().flatten().collect();
        let first = calls[0];
        let op = first.collective.name();
        if calls.iter().any(|c| {
            c.collective != first.collective || c.ty != first.ty || c.number != first.number
        }) {
            let each: Vec<String> = calls
                .iter()
                .enumerate()
                .map(|(r, c)| format!("rank {r}: {}", c.describe()))
                .collect();
            return Err(invalid(
                op,
                format!(
                    "the ranks called different collectives; expected the same op, dtype, shape \
                     and sequence number on every rank: {}",
                    each.join("; ")
                ),
            ));
        }
        let mut graph = Graph::new();
        let x = graph.param(first.ty.clone());
        let y = graph.push(Op::Collective(Box::new(first.collective.clone())), &[x])?;
        graph.output(y);
        let out_ty = graph.ty(y).clone();
        let mut inputs: Vec<(Arc<Buffer>, Option<Arc<Completion>>)> = vec![];
        for (r, c) in calls.iter().enumerate() {
            if let Some(e) = &c.failed {
                return Err(invalid(
                    op,
                    format!("rank {r} could not run the ops it recorded before it: {e}"),
                ));
            }
            match c.value.buffer() {
                Ok(Some(launched)) => inputs.push(launched),
                Ok(None) => {
                    return Err(Error::Internal(format!(
                        "{op}: rank {r}'s input is still pending after its stream was cut"
                    )));
                }
                Err(e) => {
                    return Err(invalid(op, format!("rank {r}'s input failed: {e}")));
                }
            }
        }
        let device_ids: Vec<i64> = self
            .inner
            .devices
            .iter()
            .map(|d| d.stream.device.id() as i64)
            .collect();
        let program = rt.cache.get_replicated(&graph, &device_ids, &rt.counters)?;
        self.wait_until_launchable(op, &inputs)?;
        let lists: Vec<Vec<&Buffer>> = inputs.iter().map(|(b, _)| vec![b.as_ref()]).collect();
        let replicas = program.exe.execute_replicated(&lists)?;
        Counters::add(&rt.counters.executions, 1);
        Counters::add(&rt.counters.collectives, 1);
        // Every replica may read every rank's input until it is done: each
        // rank's completion holds them all.
        let reads: Vec<Arc<Buffer>> = inputs.iter().map(|(b, _)| b.clone()).collect();
        let deps: Vec<Arc<Completion>> = inputs.iter().filter_map(|(_, d)| d.clone()).collect();
        Ok(replicas
            .into_iter()
            .zip(&calls)
            .zip(&self.inner.devices)
            .map(|(((mut outputs, event), c), device)| {
                let blame = Blame {
                    op,
                    inputs: vec![c.ty.clone()],
                    origin: c.origin.clone(),
                    chunk_ops: 1,
                };
                let done = Completion::new(event, blame, deps.clone(), reads.clone(), None);
                crate::trace::execution(&done, &c.origin, 1);
                device.stream.track(done.clone());
                Value::computed(out_ty.clone(), outputs.remove(0), done)
            })
            .collect())
    }

    /// Waits until the collective's execution cannot stall inside the
    /// plugin. An in-process plugin (XLA's CPU client) runs every replica
    /// of a collective on a pool of as many threads as devices, and its
    /// rendezvous aborts the process when a replica waits 40 s for the
    /// others. So the launch waits for every rank's input to be computed
    /// (a rank still computing would keep the others' replicas waiting
    /// there, however long its work), and for each device to have at most
    /// [`COLLECTIVE_LAUNCH_QUEUE`] executions in flight: past the plugin's
    /// own bound per device, the launch would block pool threads the
    /// running collective's replicas need, a deadlock.
    fn wait_until_launchable(
        &self,
        op: &'static str,
        inputs: &[(Arc<Buffer>, Option<Arc<Completion>>)],
    ) -> Result<()> {
        for (r, (_, producer)) in inputs.iter().enumerate() {
            if let Some(Err(e)) = producer.as_ref().map(|p| p.wait()) {
                return Err(invalid(op, format!("rank {r}'s input failed: {e}")));
            }
        }
        for device in &self.inner.devices {
            device
                .stream
                .wait_until_in_flight_at_most(COLLECTIVE_LAUNCH_QUEUE);
        }
        Ok(())
    }
}

impl Subgroups {
    /// The subgroups, each a list of the group's ranks.
    pub fn groups(&self) -> &[Vec<u32>] {
        self.groups.groups()
    }

    /// Ranks in each subgroup.
    pub fn size(&self) -> usize {
        self.groups.group_size()
    }

    /// Every rank gets the reduction of its subgroup's `x`.
    #[track_caller]
    pub fn all_reduce(&self, rank: usize, x: &Tensor, op: CollectiveReduce) -> Result<Tensor> {
        self.group.all_reduce_in(rank, x, op, self.groups.clone())
    }

    /// Every rank gets the `x` of its subgroup's rank at position `root` (of
    /// `0..size()`, in the subgroup's order), bit for bit.
    #[track_caller]
    pub fn broadcast(&self, rank: usize, x: &Tensor, root: usize) -> Result<Tensor> {
        self.group.broadcast_in(rank, x, root, self.groups.clone())
    }

    /// Every rank gets its subgroup's `x` concatenated along `dim`, in the
    /// subgroup's order.
    #[track_caller]
    pub fn all_gather(&self, rank: usize, x: &Tensor, dim: i64) -> Result<Tensor> {
        self.group.all_gather_in(rank, x, dim, self.groups.clone())
    }

    /// The reduction of the subgroup's `x`, split along `dim` into one block
    /// per subgroup rank: the rank at position `p` gets block `p`.
    #[track_caller]
    pub fn reduce_scatter(
        &self,
        rank: usize,
        x: &Tensor,
        op: CollectiveReduce,
        dim: i64,
    ) -> Result<Tensor> {
        self.group
            .reduce_scatter_in(rank, x, op, dim, self.groups.clone())
    }

    /// `all_to_all` among the ranks of each subgroup.
    #[track_caller]
    pub fn all_to_all(
        &self,
        rank: usize,
        x: &Tensor,
        split_dim: i64,
        concat_dim: i64,
    ) -> Result<Tensor> {
        self.group
            .all_to_all_in(rank, x, split_dim, concat_dim, self.groups.clone())
    }
}
