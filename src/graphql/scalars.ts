import { GraphQLError, Kind, type ValueNode } from "graphql";
import { builder } from "./builder.js";

/**
 * Money scalars: integer micro-units serialised as decimal integer strings (GraphQL Int is
 * 32-bit). Input accepts a string of digits (or an integer literal that fits exactly).
 */
function parseMicro(name: string, value: unknown): bigint {
  if (typeof value === "string" && /^-?\d+$/.test(value)) return BigInt(value);
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  throw new GraphQLError(`${name} must be an integer number of micro-units as a string`);
}

function literalMicro(name: string, ast: ValueNode): bigint {
  if (ast.kind === Kind.STRING || ast.kind === Kind.INT) return parseMicro(name, ast.value);
  throw new GraphQLError(`${name} must be an integer number of micro-units as a string`);
}

for (const name of ["MicroUsdc", "MicroDiem"] as const) {
  builder.scalarType(name, {
    description:
      name === "MicroUsdc"
        ? "USDC amount in micro-USDC (6 decimals: 1000000 = 1 USDC), as an integer string"
        : "DIEM amount in micro-DIEM (6 decimals: 1000000 = 1 DIEM = 1 USD of upstream usage), as an integer string",
    serialize: (v) => (v as bigint).toString(),
    parseValue: (v) => parseMicro(name, v),
    parseLiteral: (ast) => literalMicro(name, ast),
  });
}

builder.scalarType("DateTime", {
  description: "ISO-8601 instant (UTC)",
  serialize: (v) => (v as Date).toISOString(),
  parseValue: (v) => {
    const d = new Date(String(v));
    if (Number.isNaN(d.getTime())) throw new GraphQLError("DateTime must be an ISO-8601 instant");
    return d;
  },
});
