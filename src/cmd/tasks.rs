//! `callcheck tasks lint` and `callcheck tasks list`.

use crate::cli::{TasksCommand, TasksOpts};
use crate::task::{self, lint};
use anyhow::{Result, bail};

pub fn run(cmd: &TasksCommand) -> Result<()> {
    match cmd {
        TasksCommand::Lint(o) => lint_all(o),
        TasksCommand::List(o) => {
            let tasks = task::load(&o.tasks)?;
            print!("{}", lint::coverage_table(&tasks));
            Ok(())
        }
    }
}

fn lint_all(o: &TasksOpts) -> Result<()> {
    let tasks = task::load(&o.tasks)?;
    let mut problems = 0;
    for t in &tasks {
        for p in lint::lint_task(t) {
            eprintln!("{}: {} ({})", t.file.display(), p, t.id);
            problems += 1;
        }
    }
    if problems > 0 {
        bail!(
            "{problems} problem{} in {} tasks",
            if problems == 1 { "" } else { "s" },
            tasks.len()
        );
    }
    println!("{} tasks ok", tasks.len());
    Ok(())
}
