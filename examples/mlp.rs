//! The main job of `make demo`: a 2-layer MLP trained with a hand-written
//! backward pass and SGD on a synthetic classification task, printing the loss
//! per step and ending with one JSON line.
//!
//! The data: points in 16-d drawn around 4 class centres; a network
//! 16 -> 64 (ReLU) -> 4 learns to tell them apart.
//!
//! ```text
//! cargo run --release --example mlp [-- --steps 60]
//! ```

use eagertpu::{DType, Tensor};

const FEATURES: i64 = 16;
const HIDDEN: i64 = 64;
const CLASSES: i64 = 4;
const BATCH: i64 = 128;

/// A small deterministic generator, so every run trains on the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.next().max(1e-12), self.next());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }

    fn normals(&mut self, n: i64, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal() * scale).collect()
    }
}

/// A batch of points around per-class centres, and their labels.
fn batch(rng: &mut Rng, centres: &[f32]) -> eagertpu::Result<(Tensor, Tensor)> {
    let mut x = Vec::with_capacity((BATCH * FEATURES) as usize);
    let mut y = Vec::with_capacity(BATCH as usize);
    for _ in 0..BATCH {
        let class = (rng.next() * CLASSES as f64) as i64 % CLASSES;
        let centre = &centres[(class * FEATURES) as usize..((class + 1) * FEATURES) as usize];
        x.extend(centre.iter().map(|c| c + rng.normal()));
        y.push(class);
    }
    Ok((
        Tensor::from_slice(&x, &[BATCH, FEATURES])?,
        Tensor::from_slice(&y, &[BATCH])?,
    ))
}

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

struct Grads {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    fn new(rng: &mut Rng) -> eagertpu::Result<Mlp> {
        // Kaiming-style scales for the ReLU layer, Xavier-style for the output.
        let s1 = (2.0 / FEATURES as f32).sqrt();
        let s2 = (1.0 / HIDDEN as f32).sqrt();
        Ok(Mlp {
            w1: Tensor::from_slice(&rng.normals(FEATURES * HIDDEN, s1), &[FEATURES, HIDDEN])?,
            b1: Tensor::zeros(&[HIDDEN], DType::F32)?,
            w2: Tensor::from_slice(&rng.normals(HIDDEN * CLASSES, s2), &[HIDDEN, CLASSES])?,
            b2: Tensor::zeros(&[CLASSES], DType::F32)?,
        })
    }

    /// Loss and gradients of softmax cross-entropy, backward written by hand.
    fn loss_and_grads(&self, x: &Tensor, y: &Tensor) -> eagertpu::Result<(Tensor, Grads)> {
        // Forward.
        let pre = (&x.matmul(&self.w1)? + &self.b1)?;
        let h = pre.relu()?;
        let logits = (&h.matmul(&self.w2)? + &self.b2)?;
        let loss = logits.cross_entropy(y)?;

        // Backward: d loss / d logits = (softmax - onehot) / batch.
        let classes = Tensor::arange(0, CLASSES, 1)?;
        let onehot = y.unsqueeze(1)?.eq(&classes)?.to_dtype(DType::F32)?;
        let dlogits = ((&logits.softmax(1)? - &onehot)? / BATCH as f64)?;
        let dw2 = h.t()?.matmul(&dlogits)?;
        let db2 = dlogits.sum(&[0], false)?;
        let dh = dlogits.matmul(&self.w2.t()?)?;
        let dpre = (&dh * &pre.gt(0.0)?.to_dtype(DType::F32)?)?;
        let dw1 = x.t()?.matmul(&dpre)?;
        let db1 = dpre.sum(&[0], false)?;
        Ok((
            loss,
            Grads {
                w1: dw1,
                b1: db1,
                w2: dw2,
                b2: db2,
            },
        ))
    }

    fn sgd(&mut self, g: &Grads, lr: f64) -> eagertpu::Result<()> {
        self.w1 = (&self.w1 - &(&g.w1 * lr)?)?;
        self.b1 = (&self.b1 - &(&g.b1 * lr)?)?;
        self.w2 = (&self.w2 - &(&g.w2 * lr)?)?;
        self.b2 = (&self.b2 - &(&g.b2 * lr)?)?;
        Ok(())
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> eagertpu::Result<()> {
    let steps: usize = std::env::args()
        .skip_while(|a| a != "--steps")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let lr = 0.1;
    let manifest = eagertpu::manifest()?;
    eprint!("{}", manifest.report());

    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let centres = rng.normals(CLASSES * FEATURES, 1.0);
    let mut model = Mlp::new(&mut rng)?;
    let (mut first, mut last) = (f32::NAN, f32::NAN);
    let start = std::time::Instant::now();
    for step in 1..=steps {
        let (x, y) = batch(&mut rng, &centres)?;
        let (loss, grads) = model.loss_and_grads(&x, &y)?;
        model.sgd(&grads, lr)?;
        let loss = loss.item::<f32>()?;
        if step == 1 {
            first = loss;
        }
        last = loss;
        println!("step {step:4}  loss {loss:.4}");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let m = eagertpu::metrics()?;
    eprintln!(
        "{} steps in {elapsed:.2} s ({:.2} ms/step)",
        steps,
        elapsed * 1e3 / steps as f64
    );
    eprint!("{}", m.report());
    println!(
        "{{\"first_loss\": {first:.6}, \"last_loss\": {last:.6}, \"steps\": {steps}, \"mode\": \"{}\", \"plugin\": \"{}\", \"pjrt_api\": \"{}\"}}",
        manifest.mode, manifest.platform_name, manifest.pjrt_api
    );
    // Runs what is pending and stops the background compiles before exit.
    eagertpu::shutdown()?;
    Ok(())
}
