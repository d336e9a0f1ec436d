// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Local-world Multicall3
/// @notice The subset of Multicall3 (mds1/multicall, deployed on Base and most EVM chains at
/// 0xcA11bde05977b3631167028862bE2a173976CA11) that the x402 EVM facilitator (npm x402/evm)
/// reads through when it diagnoses a failed transfer simulation (nonce used, balance, token
/// name/version). The local chain places this contract's runtime code at the canonical address,
/// as on Base.
contract Multicall3 {
    struct Call {
        address target;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function tryAggregate(bool requireSuccess, Call[] calldata calls)
        public
        payable
        returns (Result[] memory returnData)
    {
        uint256 length = calls.length;
        returnData = new Result[](length);
        for (uint256 i = 0; i < length; i++) {
            (bool success, bytes memory ret) = calls[i].target.call(calls[i].callData);
            if (requireSuccess) require(success, "Multicall3: call failed");
            returnData[i] = Result(success, ret);
        }
    }
}
