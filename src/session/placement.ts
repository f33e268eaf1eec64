/**
 * The session's side of placement on a runner-host: which regional RunnerPool it asks
 * (src/runner/runner-pool.ts), in what order, and when it asks them all. A region's pool places
 * the session, parks it until a runner-host has room, or says no runner-host there serves its
 * harness.
 *
 * Storage layout: one key-value entry beside the SQL tables, `home_region`, written at creation
 * (the region the Worker chose: the object was created near it) and fixed after. Lifecycle:
 * nothing in memory; the pools keep the waiting sessions.
 */
import { placementOrder } from "../runner/fleet.ts";
import { configuredRegions, poolName } from "../runner/pool-name.ts";
import type { PlaceMode, Placement as PoolAnswer, Room } from "../runner/runner-pool.ts";
import { DEFAULT_REGION, type HostConfig } from "../shared/config-schema.ts";

/** Storage key of the session's home region (kept beside the SQL tables; fixed at creation). */
const HOME_REGION_KEY = "home_region";

/** What the session asks of a regional RunnerPool (its stub fits). */
export type Pool = {
  place(session: string, lease: number, harness: string, mode?: PlaceMode): Promise<PoolAnswer>;
  withdraw(session: string, lease: number): Promise<void>;
  room(harness: string): Promise<Room>;
};

export type PlacementParts = {
  /** The object's key-value storage. */
  kv: { get<T>(key: string): T | undefined; put<T>(key: string, value: T): void };
  /** The RunnerPool namespace (env.RUNNERS). */
  runners: { getByName(name: string): Pool };
};

export class Placement {
  readonly #kv: PlacementParts["kv"];
  readonly #runners: PlacementParts["runners"];

  constructor(o: PlacementParts) {
    this.#kv = o.kv;
    this.#runners = o.runners;
  }

  /** At creation. */
  setHome(region: string): void {
    this.#kv.put(HOME_REGION_KEY, region);
  }

  /**
   * Places the session in its home region's pool; where no runner-host there serves its harness
   * (they all left, or never came), in the next region that has one; if none has, it waits in the
   * home pool for a runner-host to connect.
   */
  async place(name: string, lease: number, harness: string, config: HostConfig): Promise<void> {
    const order = placementOrder(config, this.#kv.get<string>(HOME_REGION_KEY) ?? DEFAULT_REGION);
    for (const region of order) {
      if ((await this.#pool(region).place(name, lease, harness, "spill")) !== "none") return;
    }
    await this.#pool(order[0]!).place(name, lease, harness, "park");
  }

  /**
   * Places the session for a message that needs it, as `place` does, but answers false (keeping
   * nothing anywhere) where that message must be refused: every runner-host serving the harness
   * is at `limits.loaded` with nothing idle. The first region serving the harness checks its room
   * and attaches in one step, so two messages racing for its last slot are not both accepted; a
   * full region with room elsewhere parks the session (docs/design-notes.md "Regions").
   */
  async claim(name: string, lease: number, harness: string, config: HostConfig): Promise<boolean> {
    const order = placementOrder(config, this.#kv.get<string>(HOME_REGION_KEY) ?? DEFAULT_REGION);
    for (const region of order) {
      const answer = await this.#pool(region).place(name, lease, harness, "claim");
      if (answer === "none") continue;
      if (answer === "full") {
        if (await this.full(harness, config)) return false;
        await this.#pool(region).place(name, lease, harness, "park");
      }
      return true;
    }
    await this.#pool(order[0]!).place(name, lease, harness, "park");
    return true;
  }

  /** The session waited for a runner-host and needs none now: every region's pool forgets it. */
  async withdraw(name: string, lease: number, config: HostConfig): Promise<void> {
    await Promise.all(configuredRegions(config).map((region) => this.#pool(region).withdraw(name, lease)));
  }

  /**
   * No runner-host can take the session now: some pool is at its loaded-session limit and none has
   * room. With no runner-host of the harness anywhere it is not full: the session waits for one.
   */
  async full(harness: string, config: HostConfig): Promise<boolean> {
    const rooms = await Promise.all(configuredRegions(config).map((r) => this.#pool(r).room(harness)));
    return rooms.includes("full") && !rooms.includes("room");
  }

  #pool(region: string): Pool {
    return this.#runners.getByName(poolName(region));
  }
}
