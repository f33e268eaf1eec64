/** Every e2e test fails when a response or SSE frame it received broke the OpenAPI contract. */
import { afterEach, expect } from "vitest";
import { violations } from "../helpers/contract.ts";

afterEach(() => {
  const seen = violations.splice(0);
  expect(seen, "responses that break openapi.json").toEqual([]);
});
