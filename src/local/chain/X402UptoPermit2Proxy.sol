// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Permit2} from "./Permit2.sol";

/// @title Local-world x402 upto Permit2 proxy
/// @notice The contract the x402 `upto` scheme names as Permit2 spender (`x402UptoPermit2ProxyAddress`
/// in the npm package x402/evm, 0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002), with the ABI that package calls
/// (`x402UptoPermit2ProxyABI`): `settle` moves `amount` ≤ the signed maximum from the payer to the
/// witness's `to`, only when called by the witness's `facilitator` and not before `validAfter`;
/// `settleWithPermit` first tries the payer's EIP-2612 permit approving Permit2 (gas sponsoring).
/// The witness is bound into the payer's Permit2 signature, so neither the destination nor the
/// facilitator can be changed. Written for the local chain, which places the runtime code at
/// that address (anvil_setCode): Permit2's address is a constant, not a constructor argument.
contract X402UptoPermit2Proxy {
    Permit2 public constant PERMIT2 = Permit2(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    /// @notice completes Permit2's PermitWitnessTransferFrom type (types after the primary one in
    /// alphabetical order: TokenPermissions, then Witness)
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    event Settled();
    event SettledWithPermit();

    error AmountExceedsPermitted();
    error InvalidAmount();
    error InvalidDestination();
    error InvalidOwner();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error ReentrancyGuardReentrantCall();
    error UnauthorizedFacilitator();

    bool private transient entered;

    modifier nonReentrant() {
        if (entered) revert ReentrancyGuardReentrantCall();
        entered = true;
        _;
        entered = false;
    }

    function settle(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        _settle(permit, amount, owner, witness, signature);
        emit Settled();
    }

    /// @notice As `settle`, after submitting the payer's EIP-2612 permit for Permit2 (for exactly the
    /// signed maximum). A failing permit is ignored: an existing approval may still cover the transfer.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        // permit(owner, spender, value, deadline, v, r, s)
        (bool ok,) = permit.permitted.token.call(
            abi.encodeWithSelector(
                0xd505accf,
                owner,
                address(PERMIT2),
                permit2612.value,
                permit2612.deadline,
                permit2612.v,
                permit2612.r,
                permit2612.s
            )
        );
        ok; // ignored on purpose (see above)
        _settle(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        // a zero settlement would spend the nonce for nothing: x402 settles 0 by sending nothing
        if (amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();

        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            Permit2.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }
}
