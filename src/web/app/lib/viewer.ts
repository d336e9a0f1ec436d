import { graphql, type ResultOf } from "./tada.js";

/** Who is signed in (null when nobody is): the shell's header and every view's session. */
export const ViewerIdentityQuery = graphql(`
  query ViewerIdentity {
    viewer {
      accountId
      walletAddress
      authProvider
    }
  }
`);

export type ViewerIdentity = NonNullable<ResultOf<typeof ViewerIdentityQuery>["viewer"]>;
