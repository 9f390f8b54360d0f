//! Prints the aging planner's choice for a few rates (row width, k, l, load, bits per window
//! item) and how long the search takes: `cargo bench -p sift-filters --bench aging_plan_probe`.
use sift::math;

fn main() {
    for p in [0.1, 0.05, 0.01, 0.001, 1e-4, 1e-5, 1e-6] {
        for timed in [false, true] {
            let t = std::time::Instant::now();
            let plan = if timed {
                math::aging_plan_timed(p, math::AGING_DEFAULT_MAX_SLICES)
            } else {
                math::aging_plan(p, math::AGING_DEFAULT_MAX_SLICES)
            };
            let el = t.elapsed();
            let plan = plan.expect("a plan");
            let live = if timed { plan.slices as usize - 1 } else { plan.slices as usize };
            let indep = math::aging_fpr_independent(plan.k, live, &vec![plan.load; live]);
            let exact = math::aging_fpr(plan.k, live, &vec![plan.load; live]);
            println!(
                "p {p:<7} {} slices {:>2} k {:>2} l {:>2} load {:>7.3} bits/item {:>6.2} (blocked bloom {:>5.2}) exact {exact:.3e} indep {indep:.3e} ratio {:.3} paper-apbf {:.3e} [{el:?}]",
                if timed { "time " } else { "count" },
                plan.slices,
                plan.k,
                plan.l,
                plan.load,
                plan.bits_per_item,
                math::blocked_words_plan(1e6, p, 16).0 as f64 * 512.0 / 1e6,
                exact / indep,
                math::apbf_fpr(plan.k, plan.l),
            );
        }
    }
}
