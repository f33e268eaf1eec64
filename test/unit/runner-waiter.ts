/**
 * An append-only list a test can wait on: every wait has a deadline that fails with what was
 * seen (no sleeps, no retries).
 */

/** Deadline for one awaited item, ms: generous for a loaded CI machine, short enough to fail fast. */
export const WAIT_MS = 10_000;

export class Waiter<T> {
  readonly items: T[] = [];
  #cursor = 0;
  #wake = new Set<() => void>();

  push(item: T): void {
    this.items.push(item);
    for (const w of [...this.#wake]) w();
  }

  /** The next item after the previous `next` match satisfying `pred`. */
  next(pred: (item: T) => boolean = () => true, timeoutMs = WAIT_MS): Promise<T> {
    return this.#wait(() => {
      for (let i = this.#cursor; i < this.items.length; i++) {
        if (pred(this.items[i]!)) {
          this.#cursor = i + 1;
          return this.items[i];
        }
      }
      return undefined;
    }, timeoutMs);
  }

  /** The first item anywhere (cursor untouched) satisfying `pred`. */
  find(pred: (item: T) => boolean, timeoutMs = WAIT_MS): Promise<T> {
    return this.#wait(() => this.items.find(pred), timeoutMs);
  }

  nth(n: number, timeoutMs = WAIT_MS): Promise<T> {
    return this.#wait(() => this.items[n], timeoutMs);
  }

  #wait(check: () => T | undefined, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const attempt = () => {
        const found = check();
        if (found === undefined) return;
        this.#wake.delete(attempt);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        this.#wake.delete(attempt);
        const seen = this.items.slice(-12).map((i) => JSON.stringify(i).slice(0, 160));
        reject(new Error(`nothing matched within ${timeoutMs} ms; last items:\n  ${seen.join("\n  ")}`));
      }, timeoutMs);
      this.#wake.add(attempt);
      attempt();
    });
  }
}
