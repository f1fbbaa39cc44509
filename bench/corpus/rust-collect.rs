// An ordinary Rust program: collections, iterators, formatting, a Result path.
use std::collections::{BTreeMap, HashMap};

fn parse(s: &str) -> Result<u32, std::num::ParseIntError> {
    s.trim().parse::<u32>()
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    let mut x: u32 = 7;
    let mut words = Vec::new();
    for i in 0..n {
        x = x.wrapping_mul(1103515245).wrapping_add(12345);
        words.push(if i % 9 == 4 { format!("n{}", i) } else { format!("{}", (x >> 16) % 113) });
    }
    let mut freq: HashMap<&str, usize> = HashMap::new();
    let mut errs = 0;
    let mut sum = 0u64;
    for w in &words {
        *freq.entry(w.as_str()).or_insert(0) += 1;
        match parse(w) {
            Ok(v) => sum += v as u64,
            Err(_) => errs += 1,
        }
    }
    let by: BTreeMap<usize, usize> = freq.values().fold(BTreeMap::new(), |mut m, &c| {
        *m.entry(c).or_insert(0) += 1;
        m
    });
    println!("{} {} {} {:?}", sum, errs, freq.len(), by.iter().next_back());
}
