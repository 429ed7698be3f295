//! How real the model is: the service's check against real traffic (its `[fidelity]` table,
//! from a capture bench) at the count nearest a run's players, as the report's "model" box
//! (issue 68). A figure about the model, not about the run: never a failure of the run.

use horde_model::scenario::Scenario;

/// The box's figures: what is compared, the model's KS, the yardstick, and whether the model
/// is within 1.5 × the real server's own spread.
pub struct ModelCheck {
    pub label: String,
    pub value: String,
    pub limit: String,
    pub ok: bool,
}

/// The service's check against real traffic at the count nearest the run's players online at
/// the start (the report's `model` box), if the service has one.
pub fn model_box(sc: &Scenario) -> Option<ModelCheck> {
    let f = sc.service.fidelity.as_ref()?;
    let online = sc.online.unwrap_or(sc.players).min(sc.players);
    let (n, ks, spread) = f.nearest(online);
    Some(ModelCheck {
        label: format!("model vs real, {} at {n} players ({online} in this run)", f.what),
        value: format!("KS {ks:.3}"),
        limit: format!("the real server's own spread {spread:.3} (× 1.5 = {:.3}); {}", 1.5 * spread, f.against),
        ok: ks <= 1.5 * spread,
    })
}
