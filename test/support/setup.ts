// Runs before every test file: logs stay quiet (tests assert behaviour, not log lines).
import { setLogLevel } from "../../src/lib/logger.js";

setLogLevel("silent");
