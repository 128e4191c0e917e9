// SPDX-License-Identifier: GPL-2.0-only
//! The command line: the agent's options (Opts, clap) with their defaults,
//! and how a bad flag is reported (the exit codes --help lists, and the
//! error that carries one, are exit.rs's).
//!
//! Help: --help lists the product options, grouped by mechanism (clap
//! help headings), one line each. Experiment switches (A/B switches and
//! rule selectors kept for measurement) are `hide = true`: --help-all
//! prints every option with its whole description. Both are accepted
//! alike; the lab reads --help-all to load every switch.
//!
//! Defaults: each is stated once. A knob the BPF side reads has its default
//! in src/bpf/intf.h (DFL_*, through bpf_intf::dfl), which the BPF
//! initialisers use too; every other default is in its clap definition
//! below. A choice that depends on other flags is made by one Opts method
//! (numa_mode(), home_node(), memory_mode(): the last also on
//! kernel.numa_balancing, which main.rs reads into the Opts before
//! anything else uses them). The rest of the agent reads Opts, and
//! rodata.rs hands every value the BPF side reads to it (its tests check
//! that with no flag it writes what the BPF initialisers hold).
//!
//! Names: `--no-X` turns off something on by default, `--X` turns on
//! something off by default; periods and durations end in `-ms` or `-us`.
//! A renamed flag keeps its old spelling as a hidden alias.
//!
//! Errors: every error is one line on stderr starting
//! `scx_locality: error: `: parse_opts() for a bad flag (exit 2, clap's
//! code), exit.rs's classify() for the rest (fatal() carries its own exit
//! code).

use clap::{ArgAction, CommandFactory, Parser};
use std::path::PathBuf;

use crate::memory::scope::Rule;
use crate::memory::MemoryMode;
use crate::cache::{CacheBusyWake, CacheGates};
use crate::bpf_intf::dfl;
use crate::numa::{ExecPlacement, NumaBalance};
use crate::exit::{EXIT_CODES, EXIT_OK};

/// --idle-search values (bpf/push.bpf.c, the rule prev_idle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IdleSearch {
    /// The previous CPU whenever it is idle.
    PrevFirst,
    /// The previous CPU only if its whole core is idle, else an idle core first.
    CoreFirst,
}

impl IdleSearch {
    pub fn name(self) -> &'static str {
        match self {
            IdleSearch::PrevFirst => "prev-first",
            IdleSearch::CoreFirst => "core-first",
        }
    }
}

/// --enqueue-handoff values (bpf/pull.bpf.c, pull_claim_near()).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EnqueueHandoff {
    /// Every task about to queue behind a running one.
    All,
    /// Only a task queued again without a wake-up.
    Requeued,
    /// None.
    Off,
}

impl EnqueueHandoff {
    pub fn name(self) -> &'static str {
        match self {
            EnqueueHandoff::All => "all",
            EnqueueHandoff::Requeued => "requeued",
            EnqueueHandoff::Off => "off",
        }
    }
}

/// --sync-wake-target values (bpf/push.bpf.c, push_waker_cpu()).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncWakeTarget {
    /// An idle CPU from the usual search.
    Search,
    /// The waker's CPU when waker and wakee are partners (few wakees each).
    WakerIfPair,
    /// The waker's CPU for every synchronous wake-up.
    Waker,
}

/// --push-cross-node values (bpf/numa_place.bpf.c, numa_push_across()).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PushCrossNode {
    /// New tasks and wake-ups.
    Always,
    /// New tasks only; a waking task stays in its node.
    Fork,
    /// New tasks, and wake-ups except a synchronous one between partners.
    Unpaired,
    /// Never.
    Never,
}

impl PushCrossNode {
    pub fn name(self) -> &'static str {
        match self {
            PushCrossNode::Always => "always",
            PushCrossNode::Fork => "fork",
            PushCrossNode::Unpaired => "unpaired",
            PushCrossNode::Never => "never",
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "scx_locality",
    disable_version_flag = true,
    disable_help_flag = true,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    about = "Locality-aware sched_ext scheduler: idle-core/LLC/node push at wakeup, \
             SMT/LLC/node pull when idle",
    after_help = EXIT_CODES
)]
pub struct Opts {
    // ---- general (clap's "Options:") ----
    /// Time slice, in microseconds.
    #[arg(long, value_name = "US", default_value_t = dfl::SLICE_US,
          value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub slice_us: u64,

    /// Wake-up preemption's vtime threshold (us); 0: off.
    ///
    /// A woken task more than this many microseconds of virtual time ahead
    /// of the running one preempts it. Off by default: at 1000 us on numa2
    /// it preempted often yet shortened no wake-up wait (wakelat) and left
    /// hackbench within its noise.
    #[arg(long, value_name = "US", default_value_t = dfl::WAKE_GRAN_US,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub wake_gran_us: u64,

    /// Heartbeat timer period, in microseconds.
    ///
    /// The timer estimates idle-while-queued, updates the load averages and
    /// kicks stalled CPUs. Each tick is a softirq on one CPU, so shorter
    /// periods cost throughput (at 4 ms one pass took 1.9% of a CPU on 16
    /// vCPUs); the load averages decay by elapsed time whatever the period.
    #[arg(long, value_name = "US", alias = "iwq-period-us", default_value_t = dfl::HEARTBEAT_US,
          value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub heartbeat_us: u64,

    /// JSON file replacing the LLC grouping.
    ///
    /// For example {"llcs": ["0-3", "4-7"]}.
    #[arg(long, value_name = "FILE")]
    pub topology_override: Option<PathBuf>,

    // ---- push and pull: every switch here is an A/B switch ----
    /// Disable the pull side (dispatch-time stealing and stealer wake-ups).
    #[arg(long, hide = true, help_heading = "Push and pull")]
    pub no_steal: bool,

    /// Which tasks about to queue behind a running task go to an idle CPU
    /// of their LLC or node instead (bpf/pull.bpf.c, pull_claim_near()).
    /// requeued (default): only a task whose enqueue is not a wake-up (its
    /// slice ended, its affinity changed, it is new); a waking task, whose
    /// wake-up just searched for an idle CPU, waits on its CPU until that
    /// CPU frees or a CPU going idle steals it, as in Sistare's series
    /// (handing it over cost a rescheduling IPI and a move per wake-up).
    /// all: every one; off: none. --no-steal turns this off too.
    #[arg(long, hide = true, help_heading = "Push and pull", value_enum, value_name = "TASKS",
          default_value = "requeued")]
    pub enqueue_handoff: EnqueueHandoff,

    /// Skip the idle-core steps of the push side (prev core, idle core in
    /// the LLC) and pick any idle CPU, of a whole idle core or not, where
    /// the kernel's idle pick would take one first: an A/B switch for the
    /// idle-core preference.
    #[arg(long, hide = true, help_heading = "Push and pull")]
    pub no_idle_core: bool,

    /// Order of the idle-CPU search at a wake-up (bpf/push.bpf.c).
    /// prev-first (default): the previous CPU whenever it is idle, then an
    /// idle core, then an idle CPU of its LLC (the kernel's
    /// select_idle_sibling()); core-first: a whole idle core (the previous
    /// CPU's, then one of its LLC) before a previous CPU whose SMT sibling
    /// is busy, which on SMT machines moved woken tasks off an idle
    /// previous CPU (9x the kernel's migrations on haswell2s). The same on
    /// machines without SMT.
    #[arg(long, hide = true, help_heading = "Push and pull", value_enum, value_name = "ORDER",
          default_value = "prev-first")]
    pub idle_search: IdleSearch,

    /// Idle-CPU search at wakeup from our own sparse idle flags (Sistare's
    /// layout: up to 8 CPUs of one LLC per cache line, updated by
    /// ops.update_idle, searched line by line; bpf/idle.bpf.c) instead of
    /// the kernel's built-in idle masks. Off by default: the sparse flags
    /// measured no cheaper than the built-in masks.
    #[arg(long, hide = true, help_heading = "Push and pull", overrides_with = "no_sparse_idle")]
    pub sparse_idle: bool,

    /// Use the kernel's built-in idle masks for the wakeup search (default).
    #[arg(long, hide = true, help_heading = "Push and pull", overrides_with = "sparse_idle")]
    pub no_sparse_idle: bool,

    /// A task woken synchronously by a task in another LLC of its node is
    /// not moved to an idle CPU of the waker's LLC (push.bpf.c wake_affine,
    /// the kernel's wake_affine(); A/B switch).
    #[arg(long, hide = true, help_heading = "Push and pull")]
    pub no_wake_affine: bool,

    /// Where a task woken synchronously by a task of its own LLC goes,
    /// when nothing else is queued on the waker's CPU and prev is not
    /// idle: search (an idle CPU, as for any wake-up), waker-if-pair (the
    /// waker's CPU, to run there when the waker sleeps, if waker and
    /// wakee are partners), waker (the waker's CPU always, as sched_ext's
    /// built-in selection does).
    #[arg(long, hide = true, help_heading = "Push and pull", value_enum, value_name = "TARGET",
          default_value = "search")]
    pub sync_wake_target: SyncWakeTarget,

    /// A task woken onto another CPU is activated by the waker, which takes
    /// that CPU's run queue lock and sends it a reschedule IPI, instead of
    /// being queued on that CPU's wake list and activated there (the fair
    /// class's TTWU_QUEUE; sched_ext's SCX_OPS_ALLOW_QUEUED_WAKEUP, on by
    /// default, as the fair class activates wakees on their own CPU).
    /// A/B switch.
    #[arg(long, hide = true, help_heading = "Push and pull")]
    pub no_queued_wakeups: bool,

    // ---- NUMA ----
    /// Period of the cross-node balance pass, in milliseconds.
    ///
    /// Also the least time between two node changes of one task (policy
    /// modes).
    #[arg(long, value_name = "MS", help_heading = "NUMA", default_value_t = dfl::NUMA_INTERVAL_MS,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub numa_interval_ms: u64,

    /// NUMA balancing policy. off: cross-node steals whenever a CPU would
    /// idle (= --steal-cross-node), wake-ups leave the node when it has no
    /// idle CPU; upstream: Linux's bounded imbalance (imb_numa_nr); idle-cpus:
    /// the allowance of Gorman's 2019 v2 patch (small imbalances ignored while
    /// the busiest node keeps about half its CPUs idle); no-allowance: the
    /// policy with no allowance, nodes evened out however few tasks run.
    /// Default: upstream (off with --steal-cross-node).
    #[arg(long, hide = true, help_heading = "NUMA", value_enum, value_name = "MODE")]
    pub numa_balance: Option<NumaBalance>,

    /// Allow stealing from CPUs of other NUMA nodes whenever a CPU would
    /// otherwise idle. Without --numa-balance this selects
    /// --numa-balance=off (the behaviour this flag always had); with a
    /// policy mode it is ignored (the policy decides).
    #[arg(long, hide = true, help_heading = "NUMA")]
    pub steal_cross_node: bool,

    /// Let a CPU about to go idle pull a task queued for 0.5 ms or more from
    /// another node that holds more tasks now, within the NUMA allowance
    /// (bpf/numa.bpf.c idle_pull_across, the kernel's newidle balance across nodes).
    /// Off by default: without it cross-node steals happen only within the
    /// balance pass's budget or out of an overloaded node.
    #[arg(long, hide = true, help_heading = "NUMA", overrides_with = "no_idle_pull_across")]
    pub idle_pull_across: bool,

    /// No idle pull across nodes (default).
    #[arg(long, hide = true, help_heading = "NUMA", overrides_with = "idle_pull_across")]
    pub no_idle_pull_across: bool,

    /// When a task whose node has no idle CPU for it may take an idle CPU
    /// of another node, if its own node is overloaded (bpf/numa_place.bpf.c
    /// push_across, node_overloaded): always (new tasks and wake-ups), fork (new tasks only: a waking
    /// task stays in the node of its previous CPU or of its waker, as the
    /// kernel's wake-ups do, and the balance pass moves it if the imbalance
    /// lasts), unpaired (new tasks and wake-ups, but not a task woken
    /// synchronously by a partner of few partners: the two ends of a pipe or
    /// socket stay in their node), never. Default: fork under a NUMA policy,
    /// always with --numa-balance=off.
    #[arg(long, hide = true, help_heading = "NUMA", value_enum, value_name = "WHEN",
          conflicts_with = "no_push_cross_node")]
    pub push_cross_node: Option<PushCrossNode>,

    /// Same as --push-cross-node=never.
    #[arg(long, hide = true, help_heading = "NUMA")]
    pub no_push_cross_node: bool,

    /// NUMA policy: a task woken synchronously from another node never
    /// follows its waker there (numa_place.bpf.c wake_follow; A/B switch).
    #[arg(long, hide = true, help_heading = "NUMA")]
    pub no_wake_follow: bool,

    /// NUMA policy: place a new process on the least loaded node at fork
    /// too, not only at exec (a forked child then starts away from the
    /// memory it shares with its parent).
    #[arg(long, hide = true, help_heading = "NUMA")]
    pub place_at_fork: bool,

    /// Where a new program starts (at exec, and at fork with
    /// --place-at-fork). least-loaded (default): where it is when its CPU
    /// runs at most one other task at the exec, else on the least loaded
    /// node when that runs fewer tasks than the parent's (Bligh and Hohnbaum
    /// 2003);
    /// least-loaded-always: on the least loaded node whenever it runs fewer
    /// tasks, however quiet the program's CPU; allowance: near its parent
    /// while the parent's node is within the NUMA policy's allowance (today's
    /// kernel, which left N CPU-bound jobs from one shell unevenly over the
    /// nodes).
    #[arg(long, hide = true, help_heading = "NUMA", value_enum, value_name = "RULE",
          default_value = "least-loaded")]
    pub exec_placement: ExecPlacement,

    // ---- cache-aware scheduling ----
    /// On everywhere (default: only where a node has several LLCs).
    ///
    /// Cache-aware scheduling: each multi-threaded process gets a preferred
    /// LLC; idle CPUs pull its tasks there and steals/wakeups take them out
    /// of it only as --cache-gates allows; an idle CPU of the preferred LLC
    /// asks a task running elsewhere to come at its next wake-up. On by
    /// default only where a node holds more than one LLC, the only machines
    /// where it can act.
    #[arg(long, help_heading = "Cache-aware", overrides_with = "no_cache_aware")]
    pub cache_aware: bool,

    /// Switch cache-aware scheduling off.
    #[arg(long, help_heading = "Cache-aware", overrides_with = "cache_aware")]
    pub no_cache_aware: bool,

    /// Fit limit: N x the LLC's cores; 100: no limit.
    ///
    /// A process keeps its preferred LLC while its running threads are at
    /// most N x the LLC's cores, SMT siblings counted once.
    #[arg(long, value_name = "N", help_heading = "Cache-aware", alias = "aggr-tolerance",
          default_value_t = dfl::CACHE_AGGR_TOLERANCE,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub cache_aggr_tolerance: u32,

    /// Hysteresis: switch LLC past N x its occupancy.
    ///
    /// The preferred LLC changes only when another LLC has more than N
    /// times its occupancy.
    #[arg(long, value_name = "N", help_heading = "Cache-aware",
          default_value_t = dfl::CACHE_SWITCH_RATIO,
          value_parser = clap::value_parser!(u32).range(1..=16))]
    pub cache_switch_ratio: u32,

    /// Epoch length; occupancy halves every epoch.
    #[arg(long, value_name = "MS", help_heading = "Cache-aware", alias = "epoch-period-ms",
          default_value_t = dfl::CACHE_EPOCH_MS,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub cache_epoch_ms: u64,

    /// Idle epochs after which a preferred LLC is ignored.
    #[arg(long, value_name = "N", help_heading = "Cache-aware", alias = "epoch-affinity-timeout",
          default_value_t = dfl::CACHE_EPOCH_TIMEOUT,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cache_epoch_timeout: u32,

    /// Cache-aware: an LLC below PCT busy (utilisation, the moving thread
    /// counted) has room: a move into the preferred LLC is refused only
    /// when it would be past PCT and busier than the source by
    /// --cache-imb-pct, a move out only when it is past PCT and busier than
    /// the destination by --cache-imb-pct; with both LLCs past PCT the
    /// gates stand aside.
    #[arg(long, value_name = "PCT", hide = true, help_heading = "Cache-aware", alias = "overaggr-pct",
          default_value_t = dfl::CACHE_OVERAGGR_PCT,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub cache_overaggr_pct: u32,

    /// Cache-aware: how much busier (percent) one LLC must be than the other
    /// before a move into the preferred LLC is refused or a move out of it
    /// allowed.
    #[arg(long, value_name = "PCT", hide = true, help_heading = "Cache-aware", alias = "imb-pct",
          default_value_t = dfl::CACHE_IMB_PCT,
          value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub cache_imb_pct: u32,

    /// Wake-time aggregation (off by default, as in Chen/Chen/Zijlstra): a waking
    /// task takes an idle CPU of its process's preferred LLC (same node)
    /// instead of searching from its previous LLC, at every wake-up (without
    /// it only tasks asked by an idle CPU there do). Needs cache-aware.
    #[arg(long, hide = true, help_heading = "Cache-aware")]
    pub cache_wake_aggr: bool,

    /// Cache-aware: an idle CPU of a process's preferred LLC asks only
    /// threads running in its own node to come. By default it asks threads
    /// in other nodes too, while the NUMA policy lets one task move between
    /// the two nodes (the series balances towards the preferred LLC at
    /// every level, NUMA included).
    #[arg(long, hide = true, help_heading = "Cache-aware")]
    pub cache_within_node: bool,

    /// Cache-aware: when a thread may move into or out of its process's
    /// preferred LLC.
    #[arg(long, hide = true, help_heading = "Cache-aware", value_enum,
          default_value_t = CacheGates::Overload)]
    pub cache_gates: CacheGates,

    /// Cache-aware: what a waking thread does when its process's preferred
    /// LLC has no idle CPU and the gates keep it there. An idle CPU of that
    /// LLC asks a thread that left to come back.
    #[arg(long, hide = true, help_heading = "Cache-aware", value_enum, value_name = "RULE",
          default_value_t = CacheBusyWake::Wait)]
    pub cache_busy_wake: CacheBusyWake,

    // ---- memory placement ----
    /// Memory placement (default: spread, or off with kernel.numa_balancing off).
    ///
    /// off does nothing at all; local moves each process's memory to its
    /// home node; spread (van Riel 2014) does that for single-node processes
    /// and, for processes spanning nodes, keeps private memory on its node
    /// and spreads shared memory over the active nodes. Default: spread, but
    /// off when the administrator turned the kernel's NUMA balancing off
    /// (kernel.numa_balancing=0, or 2: memory tiering only): give --memory
    /// to place memory anyway. Nothing runs on a machine with one node.
    #[arg(long, value_enum, value_name = "MODE", help_heading = "Memory")]
    pub memory: Option<MemoryMode>,

    /// Touch only processes matching RULE: comm:NAME or cgroup:/PATH.
    ///
    /// Repeatable; any one rule suffices. comm:NAME is the process's name,
    /// exactly; cgroup:/PATH its cgroup v2 path, as in /proc/PID/cgroup,
    /// and every cgroup below. Default: every process.
    #[arg(long, value_name = "RULE", help_heading = "Memory")]
    pub memory_include: Vec<Rule>,

    /// Never touch processes matching RULE (wins over --memory-include).
    ///
    /// Repeatable, same rules as --memory-include: neither their pages nor
    /// their CPU affinity.
    #[arg(long, value_name = "RULE", help_heading = "Memory")]
    pub memory_exclude: Vec<Rule>,

    /// kernel.numa_balancing as read at start (main.rs); None if the
    /// kernel has none. Decides the default of --memory.
    #[arg(skip)]
    pub numa_balancing_sysctl: Option<u64>,

    /// Most MB of memory migrated in any one second.
    #[arg(long, value_name = "MBPS", help_heading = "Memory", default_value_t = 128,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub memory_budget_mbps: u64,

    /// Period of the /proc scan, in milliseconds.
    #[arg(long, value_name = "MS", help_heading = "Memory", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub memory_interval_ms: u64,

    /// Bind processes that fit one node to it (overrides their affinity).
    ///
    /// Each process whose busy threads fit one node is bound to a node (the
    /// one holding its memory if it has room), so that it becomes
    /// single-node and its memory can follow; restricted threads are left
    /// alone, masks are given back on exit. Off by default: it overrides
    /// the CPU affinity the application sees.
    #[arg(long, help_heading = "Memory")]
    pub memory_node_affinity: bool,

    /// Give no process a home node.
    ///
    /// By default each process with two or more busy threads that fit one
    /// node gets a home node (the one holding its memory if it has room,
    /// within a fair share of the busy threads) and BPF keeps its threads
    /// there: wake-ups go home, pushes and steals do not take them away,
    /// the balance pass sends them back or swaps two (home.bpf.c). A soft
    /// preference, unlike --memory-node-affinity. Needs --memory and a NUMA
    /// policy.
    #[arg(long, help_heading = "Memory")]
    pub no_home_node: bool,

    /// Memory placement: do not give threads of a process too big for one
    /// node homes of their own. By default such a process's busy threads
    /// each get a home node among the fewest nodes it runs on most that hold
    /// them all, so each thread's private memory can stay local and the
    /// process's shared memory is spread over a stable set of nodes
    /// (memory/home.rs). Implied by --no-home-node.
    #[arg(long, hide = true, help_heading = "Memory")]
    pub no_thread_home: bool,

    // ---- statistics and output ----
    /// Run the scheduler and print statistics every SECS seconds.
    ///
    /// 0.1 to 3600, fractions allowed.
    #[arg(long, value_name = "SECS", help_heading = "Stats and output", value_parser = parse_interval)]
    pub stats: Option<f64>,

    /// Load nothing: print the running instance's statistics every SECS s.
    ///
    /// 0.1 to 3600, fractions allowed.
    #[arg(long, value_name = "SECS", help_heading = "Stats and output", conflicts_with = "stats",
          value_parser = parse_interval)]
    pub monitor: Option<f64>,

    /// Show descriptions for statistics.
    #[arg(long, help_heading = "Stats and output")]
    pub help_stats: bool,

    /// Explain's decision records per second per CPU; 0: none.
    ///
    /// Placement decisions recorded for `explain`: moves across LLCs and
    /// nodes with the rule that made them, and refused moves, per second
    /// per CPU at most. The cost shows in --stats ("decide").
    #[arg(long, value_name = "N", help_heading = "Stats and output",
          default_value_t = dfl::DECISION_RATE,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub decision_rate: u64,

    /// Processes in the cache-aware statistics.
    ///
    /// The top processes by runtime, with their preferred LLC.
    #[arg(long, value_name = "N", help_heading = "Stats and output", default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub cache_top: u64,

    /// Size of the kernel's debug dump on ejection (bytes).
    ///
    /// 0: the kernel's default.
    #[arg(long, value_name = "BYTES", help_heading = "Stats and output", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=(1 << 24)))]
    pub exit_dump_len: u32,

    /// More logging (-v: debug, -vv: also libbpf's debug output).
    #[arg(short, long, help_heading = "Stats and output", action = ArgAction::Count)]
    pub verbose: u8,

    /// Log level: error, warn, info, debug or trace; overrides -v.
    ///
    /// trace also shows libbpf's debug output.
    #[arg(long, value_name = "LEVEL", help_heading = "Stats and output", hide_possible_values = true,
          value_parser = ["error", "warn", "info", "debug", "trace"])]
    pub log_level: Option<String>,

    /// Print the version and exit.
    ///
    /// With the git commit it was built from, if any, and the build target.
    #[arg(short = 'V', long, help_heading = "Stats and output")]
    pub version: bool,

    /// Print help (--help-all: every option, experiment switches too).
    #[arg(short = 'h', long, help_heading = "Stats and output", action = ArgAction::HelpShort)]
    pub help: Option<bool>,

    /// Print help with every option, the experiment switches too, and exit.
    #[arg(long, help_heading = "Stats and output")]
    pub help_all: bool,

    /// A command instead of running the scheduler (its flags stay out of
    /// the scheduler's own).
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Ask the running scx_locality why a process's threads and pages are
    /// where they are.
    Explain(crate::explain::ExplainOpts),
}

/// The version as --version prints it and as the kernel shows it after
/// the ops name: "0.1.0-g<commit> <target>", in scx_utils' format.
pub fn full_version() -> String {
    scx_utils::build_id::full_version(&semver())
}

/// The ops name the kernel shows in /sys/kernel/sched_ext/root/ops:
/// "locality_<version>_<target>", spelled as scx_utils does for every
/// scx scheduler (tools that list schedulers read the prefix).
pub fn ops_name(base: &str) -> String {
    base.to_string() + &scx_utils::build_id::ops_version_suffix(&semver())
}

fn semver() -> String {
    let v = env!("CARGO_PKG_VERSION");
    match option_env!("LOCALITY_GIT_SHA") {
        Some(sha) if !sha.is_empty() => format!("{v}-g{sha}"),
        _ => v.to_string(),
    }
}

/// A --stats/--monitor interval in seconds.
fn parse_interval(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.1..=3600.0).contains(&v) {
        return Err(format!("{v} s: must be between 0.1 and 3600 seconds"));
    }
    Ok(v)
}

impl Opts {
    /// Sparse idle tracking in force (only with --sparse-idle; the last
    /// of --sparse-idle / --no-sparse-idle wins).
    pub fn sparse_idle(&self) -> bool {
        self.sparse_idle && !self.no_sparse_idle
    }

    /// Idle pull across nodes in force (only with --idle-pull-across; the
    /// last of --idle-pull-across / --no-idle-pull-across wins).
    pub fn idle_pull_across(&self) -> bool {
        self.idle_pull_across && !self.no_idle_pull_across
    }

    /// Cache-aware scheduling as asked: Some(true) with --cache-aware,
    /// Some(false) with --no-cache-aware (the last of the two wins), None
    /// when neither is given (then the machine decides, rodata.rs).
    pub fn cache_aware(&self) -> Option<bool> {
        if self.no_cache_aware {
            Some(false)
        } else if self.cache_aware {
            Some(true)
        } else {
            None
        }
    }

    /// The log level in force and whether libbpf's debug output is shown:
    /// --log-level if given, else -v (debug) / -vv (debug and libbpf's).
    pub fn log_level(&self) -> (log::LevelFilter, bool) {
        use log::LevelFilter as L;
        match self.log_level.as_deref() {
            Some("error") => (L::Error, false),
            Some("warn") => (L::Warn, false),
            Some("info") => (L::Info, false),
            Some("debug") => (L::Debug, false),
            Some(_) => (L::Trace, true),
            None if self.verbose > 1 => (L::Debug, true),
            None if self.verbose == 1 => (L::Debug, false),
            None => (L::Info, false),
        }
    }

    /// When a task may be pushed to another node (--push-cross-node).
    pub fn push_cross_node(&self) -> PushCrossNode {
        match self.push_cross_node {
            Some(w) => w,
            None if self.no_push_cross_node => PushCrossNode::Never,
            None if self.numa_mode() == NumaBalance::Off => PushCrossNode::Always,
            None => PushCrossNode::Fork,
        }
    }

    /// The NUMA mode in force: --numa-balance, else off if
    /// --steal-cross-node was given (its old meaning), else upstream.
    pub fn numa_mode(&self) -> NumaBalance {
        match self.numa_balance {
            Some(m) => m,
            None if self.steal_cross_node => NumaBalance::Off,
            None => NumaBalance::Upstream,
        }
    }

    /// The memory mode in force: --memory if given, else spread unless the
    /// administrator switched the kernel's NUMA balancing off: bit 0 of
    /// kernel.numa_balancing (NUMA_BALANCING_NORMAL) clear, so 0, or 2
    /// (memory tiering only: the kernel moves pages between memory tiers,
    /// not towards the nodes their tasks run on).
    pub fn memory_mode(&self) -> MemoryMode {
        match self.memory {
            Some(m) => m,
            None if self.numa_balancing_sysctl.is_some_and(|v| v & 1 == 0) => MemoryMode::Off,
            None => MemoryMode::Spread,
        }
    }

    /// Home nodes (home.bpf.c): on unless --no-home-node; they need the
    /// memory thread (it plans them) and a NUMA policy (it enforces them).
    pub fn home_node(&self) -> bool {
        !self.no_home_node && self.memory_mode() != MemoryMode::Off && self.numa_mode() != NumaBalance::Off
    }

    /// Thread homes for processes spanning nodes (memory/home.rs): with home
    /// nodes, unless --no-thread-home.
    pub fn thread_home(&self) -> bool {
        self.home_node() && !self.no_thread_home
    }
}

/// Parse the command line; on a bad flag print one prefixed line and exit 2
/// (clap's code), --help/--version go to stdout with exit 0.
pub fn parse_opts() -> Opts {
    match Opts::try_parse() {
        Ok(o) if o.help_all => {
            print!("{}", help_all());
            std::process::exit(EXIT_OK);
        }
        Ok(o) => o,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            eprintln!("scx_locality: error: {}", flag_error_line(&e));
            std::process::exit(e.exit_code());
        }
    }
}

/// What --help-all prints: the long help with every option, the hidden
/// experiment switches (A/B switches and rule selectors kept for
/// measurement) in their mechanism's group.
pub fn help_all() -> String {
    Opts::command().mut_args(|a| a.hide(false)).render_long_help().to_string()
}

/// The first line of a clap error, without clap's own "error: " prefix.
fn flag_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("bad command line").trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> std::result::Result<Opts, clap::Error> {
        Opts::try_parse_from(std::iter::once("scx_locality").chain(args.iter().copied()))
    }

    /// --push-cross-node: fork under a NUMA policy, always without one;
    /// --no-push-cross-node is never; the two together are refused.
    #[test]
    fn push_cross_node_modes() {
        let when = |args: &[&str]| parse(args).unwrap().push_cross_node();
        assert_eq!(when(&[]), PushCrossNode::Fork);
        assert_eq!(when(&["--numa-balance", "off"]), PushCrossNode::Always);
        assert_eq!(when(&["--steal-cross-node"]), PushCrossNode::Always);
        assert_eq!(when(&["--numa-balance", "off", "--push-cross-node", "fork"]), PushCrossNode::Fork);
        assert_eq!(when(&["--no-push-cross-node"]), PushCrossNode::Never);
        assert_eq!(when(&["--push-cross-node", "always"]), PushCrossNode::Always);
        assert_eq!(when(&["--push-cross-node", "unpaired"]), PushCrossNode::Unpaired);
        assert!(parse(&["--push-cross-node", "always", "--no-push-cross-node"]).is_err());
    }

    #[test]
    fn defaults() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.slice_us, 5000);
        assert_eq!(o.heartbeat_us, 20000);
        assert!(!o.no_steal && !o.no_idle_core && !o.steal_cross_node);
        assert!(o.stats.is_none() && o.monitor.is_none());
        assert_eq!(o.numa_mode(), NumaBalance::Upstream);
        assert_eq!(o.push_cross_node(), PushCrossNode::Fork);
        assert_eq!(o.exec_placement, ExecPlacement::LeastLoaded);
        assert_eq!(
            parse(&["--exec-placement=allowance"]).unwrap().exec_placement,
            ExecPlacement::Allowance
        );
        assert_eq!(o.numa_interval_ms, 150);
        assert_eq!(o.idle_search, IdleSearch::PrevFirst);
        assert_eq!(
            parse(&["--idle-search=core-first"]).unwrap().idle_search,
            IdleSearch::CoreFirst
        );
    }

    #[test]
    fn numa_flags() {
        assert_eq!(parse(&["--numa-balance=off"]).unwrap().numa_mode(), NumaBalance::Off);
        assert_eq!(
            parse(&["--numa-balance", "idle-cpus"]).unwrap().numa_mode(),
            NumaBalance::IdleCpus
        );
        assert_eq!(
            parse(&["--numa-balance=no-allowance"]).unwrap().numa_mode(),
            NumaBalance::NoAllowance
        );
        // the old flag alone keeps its old meaning
        assert_eq!(parse(&["--steal-cross-node"]).unwrap().numa_mode(), NumaBalance::Off);
        assert_eq!(
            parse(&["--steal-cross-node", "--numa-balance=upstream"])
                .unwrap()
                .numa_mode(),
            NumaBalance::Upstream
        );
        assert!(parse(&["--numa-balance=bogus"]).is_err());
        assert!(parse(&["--numa-interval-ms", "0"]).is_err());
        assert_eq!(parse(&["--numa-interval-ms", "40"]).unwrap().numa_interval_ms, 40);
    }

    #[test]
    fn cache_flags() {
        let o = parse(&[]).unwrap();
        assert!(o.cache_aware().is_none() && !o.cache_wake_aggr);
        assert_eq!(
            (o.cache_aggr_tolerance, o.cache_switch_ratio, o.cache_epoch_ms),
            (1, 2, 10)
        );
        assert_eq!((o.cache_epoch_timeout, o.cache_overaggr_pct, o.cache_imb_pct), (50, 50, 20));
        assert_eq!(parse(&["--no-cache-aware"]).unwrap().cache_aware(), Some(false));
        assert_eq!(parse(&["--cache-aware"]).unwrap().cache_aware(), Some(true));
        // the last of the pair wins
        assert_eq!(parse(&["--no-cache-aware", "--cache-aware"]).unwrap().cache_aware(), Some(true));
        assert_eq!(parse(&["--cache-aware", "--no-cache-aware"]).unwrap().cache_aware(), Some(false));
        assert!(parse(&["--cache-wake-aggr"]).unwrap().cache_wake_aggr);
        assert!(!o.cache_within_node && parse(&["--cache-within-node"]).unwrap().cache_within_node);
        assert_eq!(o.cache_gates, CacheGates::Overload);
        assert_eq!(o.cache_busy_wake, CacheBusyWake::Wait);
        assert_eq!(parse(&["--cache-busy-wake=leave"]).unwrap().cache_busy_wake, CacheBusyWake::Leave);
        assert_eq!(
            parse(&["--cache-gates=utilisation"]).unwrap().cache_gates,
            CacheGates::Utilisation
        );
        for bad in [
            "--cache-aggr-tolerance=0",
            "--cache-aggr-tolerance=101",
            "--cache-switch-ratio=0",
            "--cache-switch-ratio=17",
            "--cache-epoch-ms=0",
            "--cache-epoch-ms=10001",
            "--cache-epoch-timeout=0",
            "--cache-overaggr-pct=0",
            "--cache-overaggr-pct=101",
            "--cache-imb-pct=-1",
            "--cache-imb-pct=1001",
            "--cache-top=1001",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            let flag = bad.split('=').next().unwrap();
            assert!(flag_error_line(&e).contains(flag), "{bad}: {e}");
        }
        assert_eq!(parse(&["--cache-imb-pct=0"]).unwrap().cache_imb_pct, 0);
        assert_eq!(parse(&["--cache-aggr-tolerance=100"]).unwrap().cache_aggr_tolerance, 100);
    }

    #[test]
    fn enqueue_handoff_values() {
        assert_eq!(parse(&[]).unwrap().enqueue_handoff, EnqueueHandoff::Requeued);
        for v in [EnqueueHandoff::All, EnqueueHandoff::Requeued, EnqueueHandoff::Off] {
            let flag = format!("--enqueue-handoff={}", v.name());
            assert_eq!(parse(&[flag.as_str()]).unwrap().enqueue_handoff, v);
        }
        assert_eq!(parse(&["--enqueue-handoff=some"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn idle_pull_across_flags() {
        assert!(!parse(&[]).unwrap().idle_pull_across());
        assert!(parse(&["--idle-pull-across"]).unwrap().idle_pull_across());
        assert!(!parse(&["--no-idle-pull-across"]).unwrap().idle_pull_across());
        // the last of the pair wins
        assert!(parse(&["--no-idle-pull-across", "--idle-pull-across"]).unwrap().idle_pull_across());
        assert!(!parse(&["--idle-pull-across", "--no-idle-pull-across"]).unwrap().idle_pull_across());
    }

    #[test]
    fn sparse_idle_flags() {
        let o = parse(&[]).unwrap();
        assert!(!o.sparse_idle());
        assert!(parse(&["--sparse-idle"]).unwrap().sparse_idle());
        assert!(!parse(&["--no-sparse-idle"]).unwrap().sparse_idle());
        // the last of the pair wins; a repeat is refused like other switches
        assert!(parse(&["--no-sparse-idle", "--sparse-idle"]).unwrap().sparse_idle());
        assert!(!parse(&["--sparse-idle", "--no-sparse-idle"]).unwrap().sparse_idle());
        assert_eq!(parse(&["--sparse-idle", "--sparse-idle"]).unwrap_err().exit_code(), 2);
        // a switch, not an option with a value
        let e = parse(&["--sparse-idle=1"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(flag_error_line(&e).contains("--sparse-idle"), "{e}");
        // independent of the idle-core switch
        let o = parse(&["--sparse-idle", "--no-idle-core"]).unwrap();
        assert!(o.sparse_idle() && o.no_idle_core);
    }

    #[test]
    fn memory_follows_the_administrators_switch() {
        let with = |args: &[&str], sysctl: Option<u64>| {
            let mut o = parse(args).unwrap();
            o.numa_balancing_sysctl = sysctl;
            o
        };
        // kernel.numa_balancing=0: no placement, no homes, unless asked
        let o = with(&[], Some(0));
        assert_eq!(o.memory_mode(), MemoryMode::Off);
        assert!(!o.home_node());
        assert_eq!(with(&["--memory=spread"], Some(0)).memory_mode(), MemoryMode::Spread);
        assert_eq!(with(&["--memory=local"], Some(0)).memory_mode(), MemoryMode::Local);
        assert!(with(&["--memory=spread"], Some(0)).home_node());
        // on (1, or 3: with memory tiering), or a kernel without it: the default
        for v in [Some(1), Some(3), None] {
            assert_eq!(with(&[], v).memory_mode(), MemoryMode::Spread, "{v:?}");
        }
        // memory tiering only (2): NUMA balancing proper is off
        assert_eq!(with(&[], Some(2)).memory_mode(), MemoryMode::Off);
        assert_eq!(with(&["--memory=spread"], Some(2)).memory_mode(), MemoryMode::Spread);
        assert_eq!(with(&["--memory=off"], Some(1)).memory_mode(), MemoryMode::Off);
    }

    #[test]
    fn memory_scope_flags() {
        let o = parse(&[]).unwrap();
        assert!(o.memory_include.is_empty() && o.memory_exclude.is_empty());
        let o = parse(&[
            "--memory-exclude",
            "comm:backup",
            "--memory-exclude=cgroup:/batch.slice",
            "--memory-include=cgroup:/work",
        ])
        .unwrap();
        assert_eq!(o.memory_exclude, vec![Rule::Comm("backup".into()), Rule::Cgroup("/batch.slice".into())]);
        assert_eq!(o.memory_include, vec![Rule::Cgroup("/work".into())]);
        for bad in ["--memory-exclude=backup", "--memory-include=cgroup:work", "--memory-exclude=comm:"] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            let flag = bad.split('=').next().unwrap();
            assert!(flag_error_line(&e).contains(flag), "{bad}: {e}");
        }
    }

    #[test]
    fn memory_flags() {
        let o = parse(&[]).unwrap();
        // not given: spread (the sysctl, read by main, may turn it off)
        assert_eq!(o.memory, None);
        assert_eq!(o.memory_mode(), MemoryMode::Spread);
        assert_eq!((o.memory_budget_mbps, o.memory_interval_ms), (128, 1000));
        assert!(!o.memory_node_affinity);
        assert!(parse(&["--memory-node-affinity"]).unwrap().memory_node_affinity);
        assert!(o.home_node());
        assert!(!parse(&["--no-home-node"]).unwrap().home_node());
        assert!(!parse(&["--memory=off"]).unwrap().home_node());
        assert!(!parse(&["--numa-balance=off"]).unwrap().home_node());
        assert!(o.thread_home());
        assert!(!parse(&["--no-thread-home"]).unwrap().thread_home());
        assert!(parse(&["--no-thread-home"]).unwrap().home_node());
        assert!(!parse(&["--no-home-node"]).unwrap().thread_home());
        assert_eq!(parse(&["--memory=off"]).unwrap().memory_mode(), MemoryMode::Off);
        assert_eq!(parse(&["--memory", "local"]).unwrap().memory, Some(MemoryMode::Local));
        assert_eq!(parse(&["--memory-budget-mbps=1"]).unwrap().memory_budget_mbps, 1);
        assert_eq!(parse(&["--memory-interval-ms=100"]).unwrap().memory_interval_ms, 100);
        for bad in [
            "--memory=bogus",
            "--memory-budget-mbps=0",
            "--memory-budget-mbps=100001",
            "--memory-interval-ms=99",
            "--memory-interval-ms=60001",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            let flag = bad.split('=').next().unwrap();
            assert!(flag_error_line(&e).contains(flag), "{bad}: {e}");
        }
    }

    #[test]
    fn slice_range() {
        assert_eq!(parse(&["--slice-us", "100"]).unwrap().slice_us, 100);
        assert_eq!(parse(&["--slice-us", "100000"]).unwrap().slice_us, 100_000);
        for bad in ["99", "100001", "0", "-5", "abc"] {
            let arg = format!("--slice-us={bad}");
            let e = parse(&[arg.as_str()]).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::ValueValidation | ErrorKind::InvalidValue),
                "{bad}: {e}"
            );
            // clap exits with 2 for these
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("--slice-us"), "{e}");
        }
    }

    #[test]
    fn flag_errors_are_one_line() {
        let e = parse(&["--slice-us=5"]).unwrap_err();
        let line = flag_error_line(&e);
        assert!(!line.starts_with("error:"), "{line}");
        assert!(line.contains("--slice-us") && line.contains("100..=100000"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn other_ranges() {
        assert!(parse(&["--stats", "0"]).is_err());
        assert!(parse(&["--stats", "3601"]).is_err());
        assert_eq!(parse(&["--stats", "2"]).unwrap().stats, Some(2.0));
        assert_eq!(parse(&["--monitor", "0.5"]).unwrap().monitor, Some(0.5));
        assert!(parse(&["--monitor", "0"]).is_err());
        assert!(parse(&["--monitor", "0.05"]).is_err());
        assert!(parse(&["--monitor", "NaN"]).is_err());
        assert!(parse(&["--monitor", "soon"]).is_err());
        assert!(parse(&["--heartbeat-us", "99"]).is_err());
        assert!(parse(&["--wake-gran-us", "100001"]).is_err());
        assert_eq!(parse(&["--wake-gran-us", "0"]).unwrap().wake_gran_us, 0);
        assert_eq!(parse(&[]).unwrap().wake_gran_us, 0);
        assert!(parse(&["--heartbeat-us", "1000001"]).is_err());
        assert!(parse(&["--exit-dump-len", "16777217"]).is_err());
        assert!(parse(&["--stats", "1", "--monitor", "1"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }

    #[test]
    fn renamed_flags_keep_their_old_spelling() {
        // (new, old): the old one is a hidden alias
        let help = help_all();
        // (new, old, a value in range, the field)
        type Renamed = (&'static str, &'static str, u64, fn(&Opts) -> u64);
        let pairs: [Renamed; 6] = [
            ("--heartbeat-us", "--iwq-period-us", 2000, |o| o.heartbeat_us),
            ("--cache-aggr-tolerance", "--aggr-tolerance", 30, |o| o.cache_aggr_tolerance.into()),
            ("--cache-epoch-ms", "--epoch-period-ms", 30, |o| o.cache_epoch_ms),
            ("--cache-epoch-timeout", "--epoch-affinity-timeout", 30, |o| o.cache_epoch_timeout.into()),
            ("--cache-overaggr-pct", "--overaggr-pct", 30, |o| o.cache_overaggr_pct.into()),
            ("--cache-imb-pct", "--imb-pct", 30, |o| o.cache_imb_pct.into()),
        ];
        for (new, old, v, get) in pairs {
            for flag in [new, old] {
                assert_eq!(get(&parse(&[&format!("{flag}={v}")]).unwrap()), v, "{flag}");
            }
            // listed under the new name only (the old one is a substring of
            // some new names, so look for it as a whole word)
            assert!(help.contains(&format!(" {new} ")), "{new}");
            assert!(!help.contains(&format!(" {old} ")), "{old}");
        }
    }

    #[test]
    fn flags() {
        let o = parse(&[
            "--no-steal",
            "--no-idle-core",
            "--steal-cross-node",
            "--no-push-cross-node",
            "--topology-override",
            "/tmp/x.json",
            "-vv",
        ])
        .unwrap();
        assert!(o.no_steal && o.no_idle_core && o.steal_cross_node && o.no_push_cross_node);
        assert_eq!(o.topology_override, Some(PathBuf::from("/tmp/x.json")));
        assert_eq!(o.verbose, 2);
    }

    #[test]
    fn log_levels() {
        use log::LevelFilter as L;
        assert_eq!(parse(&[]).unwrap().log_level(), (L::Info, false));
        assert_eq!(parse(&["-v"]).unwrap().log_level(), (L::Debug, false));
        assert_eq!(parse(&["-vv"]).unwrap().log_level(), (L::Debug, true));
        assert_eq!(parse(&["-vv", "--log-level", "warn"]).unwrap().log_level(), (L::Warn, false));
        assert_eq!(parse(&["--log-level=trace"]).unwrap().log_level(), (L::Trace, true));
        assert!(parse(&["--log-level", "loud"]).is_err());
    }

    #[test]
    fn version_and_ops_name() {
        let v = full_version();
        assert!(v.starts_with(env!("CARGO_PKG_VERSION")), "{v}");
        // the build target follows after a space, as scx_utils prints it
        assert!(v.split_once(' ').is_some_and(|(_, t)| t.contains("linux")), "{v}");
        if let Some(sha) = option_env!("LOCALITY_GIT_SHA") {
            assert!(v.contains(&format!("-g{sha}")), "{v}");
        }
        let ops = ops_name("locality");
        // what the kernel shows: the name, then '_' and the version with
        // every character outside [A-Za-z0-9._] turned into '_'
        assert!(ops.starts_with(&format!("locality_{}", env!("CARGO_PKG_VERSION"))), "{ops}");
        assert!(ops.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_'), "{ops}");
        assert!(ops.len() < 128, "longer than the kernel's SCX_OPS_NAME_LEN: {ops}");
        assert!(parse(&["--version"]).unwrap().version && parse(&["-V"]).unwrap().version);
    }

    /// The experiment switches (A/B switches, rule selectors, the old
    /// --steal-cross-node): hidden from --help, listed by --help-all.
    const EXPERIMENT_SWITCHES: &[&str] = &[
        "no-steal",
        "enqueue-handoff",
        "no-idle-core",
        "idle-search",
        "sparse-idle",
        "no-sparse-idle",
        "no-wake-affine",
        "sync-wake-target",
        "no-queued-wakeups",
        "numa-balance",
        "steal-cross-node",
        "idle-pull-across",
        "no-idle-pull-across",
        "push-cross-node",
        "no-push-cross-node",
        "no-wake-follow",
        "place-at-fork",
        "exec-placement",
        "cache-overaggr-pct",
        "cache-imb-pct",
        "cache-wake-aggr",
        "cache-within-node",
        "cache-gates",
        "cache-busy-wake",
        "no-thread-home",
    ];

    /// Whether `text` has an option line for --`long` ("  -v, --verbose...",
    /// "      --slice-us <US>  Time slice...").
    fn lists(text: &str, long: &str) -> bool {
        let flag = format!("--{long}");
        text.lines().any(|l| {
            let l = l.trim_start();
            let l = if l.len() > 4 && l.as_bytes()[0] == b'-' && &l[2..4] == ", " { &l[4..] } else { l };
            l.strip_prefix(&flag).is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '.']))
        })
    }

    #[test]
    fn help_shows_the_product_options_and_help_all_every_option() {
        let help = parse(&["--help"]).unwrap_err().to_string();
        let short = parse(&["-h"]).unwrap_err().to_string();
        assert_eq!(help, short);
        let lines = help.lines().count();
        assert!(lines <= 62, "--help is {lines} lines:\n{help}");
        let all = help_all();
        let cmd = Opts::command();
        let hidden: Vec<&str> =
            cmd.get_arguments().filter(|a| a.is_hide_set()).filter_map(|a| a.get_long()).collect();
        assert_eq!(hidden, EXPERIMENT_SWITCHES);
        for a in cmd.get_arguments() {
            let long = a.get_long().expect("every option has a long name");
            assert_eq!(lists(&help, long), !a.is_hide_set(), "--{long} in --help:\n{help}");
            assert!(lists(&all, long), "--{long} not in --help-all");
            // grouped by mechanism, but for the few general ones
            let general = ["slice-us", "wake-gran-us", "heartbeat-us", "topology-override"];
            assert_eq!(a.get_help_heading().is_none(), general.contains(&long), "--{long}");
        }
        // the long help holds the whole descriptions and every choice
        assert!(all.contains("Possible values:") && all.contains("core-first"), "{all}");
        assert!(all.len() > 2 * help.len());
        for text in [&help, &all] {
            assert!(!text.contains("docs/"), "help points into docs/");
            assert!(text.contains("Exit codes:"));
        }
        // a switch like any other: with others, and alone
        assert!(parse(&["--help-all"]).unwrap().help_all);
        assert!(!parse(&[]).unwrap().help_all);
    }

    /// The knobs the BPF side reads default to intf.h's DFL_*, the values
    /// its initialisers hold (rodata.rs's tests compare the object itself).
    #[test]
    fn bpf_knob_defaults_are_intf_h() {
        use crate::bpf_intf as i;
        let o = parse(&[]).unwrap();
        assert_eq!(o.slice_us, i::locality_consts_DFL_SLICE_US as u64);
        assert_eq!(o.heartbeat_us, i::locality_consts_DFL_IWQ_PERIOD_US as u64);
        assert_eq!(o.wake_gran_us, i::locality_consts_DFL_WAKE_GRAN_US as u64);
        assert_eq!(o.numa_interval_ms, i::locality_consts_DFL_NUMA_INTERVAL_MS as u64);
        assert_eq!(o.cache_epoch_ms, i::locality_consts_DFL_CACHE_EPOCH_MS as u64);
        assert_eq!(o.cache_epoch_timeout, i::locality_consts_DFL_CACHE_EPOCH_TIMEOUT);
        assert_eq!(o.cache_switch_ratio, i::locality_consts_DFL_CACHE_SWITCH_RATIO);
        assert_eq!(o.cache_aggr_tolerance, i::locality_consts_DFL_CACHE_AGGR_TOL);
        assert_eq!(o.cache_overaggr_pct, i::locality_consts_DFL_CACHE_OVERAGGR_PCT);
        assert_eq!(o.cache_imb_pct, i::locality_consts_DFL_CACHE_IMB_PCT);
        assert_eq!(o.decision_rate, i::locality_consts_DFL_DECISION_RATE as u64);
    }

    #[test]
    fn help_lists_exit_codes() {
        let e = parse(&["--help"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        let s = e.to_string();
        for code in ["0  clean exit", "5  another sched_ext", "6  bad --topology-override", "7  scheduler ejected"] {
            assert!(s.contains(code), "help lacks {code:?}");
        }
    }
}
