// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Local-world Permit2 (signature transfers only)
/// @notice The part of Uniswap's Permit2 (canonical address 0x000000000022D473030F116dDEE9F6B43aC78BA3
/// on Base and most EVM chains) that the x402 `upto` scheme uses: `permitWitnessTransferFrom` with
/// Permit2's EIP-712 domain (name "Permit2", chainId, verifyingContract; no version), unordered
/// nonces in a bitmap (`nonceBitmap`, `invalidateUnorderedNonces`) and the token moved with its
/// `transferFrom` (the owner approved this contract on the ERC-20). Written for the local chain,
/// which places its runtime code at the canonical address (anvil_setCode): so nothing is
/// immutable and the domain separator is computed per call from block.chainid and address(this).
/// Errors carry Permit2's names and selectors, so the facilitator reads the same reverts.
contract Permit2 {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    /// @notice owner => word position => bitmap of used nonces (nonce = word << 8 | bit)
    mapping(address => mapping(uint256 => uint256)) public nonceBitmap;

    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant HASHED_NAME = keccak256("Permit2");
    bytes32 private constant TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    /// the witness type string the caller passes completes this stub (`Witness witness)…`)
    string private constant WITNESS_TRANSFER_STUB =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";
    bytes4 private constant ERC1271_MAGIC_VALUE = 0x1626ba7e;

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    error InvalidAmount(uint256 maxAmount);
    error SignatureExpired(uint256 signatureDeadline);
    error InvalidNonce();
    error InvalidSignatureLength();
    error InvalidSignature();
    error InvalidSigner();
    error InvalidContractSignature();
    error TransferFromFailed();

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, HASHED_NAME, block.chainid, address(this)));
    }

    /// @notice Moves `transferDetails.requestedAmount` (at most the permitted amount) of the
    /// permitted token from `owner` to `transferDetails.to`, once per nonce, when `owner` signed the
    /// permit for `msg.sender` as spender together with `witness` (an EIP-712 struct hash whose type
    /// `witnessTypeString` describes).
    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (transferDetails.requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useUnorderedNonce(owner, permit.nonce);

        bytes32 typeHash = keccak256(abi.encodePacked(WITNESS_TRANSFER_STUB, witnessTypeString));
        bytes32 permittedHash =
            keccak256(abi.encode(TOKEN_PERMISSIONS_TYPEHASH, permit.permitted.token, permit.permitted.amount));
        bytes32 structHash =
            keccak256(abi.encode(typeHash, permittedHash, msg.sender, permit.nonce, permit.deadline, witness));
        _checkSignature(signature, keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash)), owner);

        _transferFrom(permit.permitted.token, owner, transferDetails.to, transferDetails.requestedAmount);
    }

    /// @notice The caller gives up the nonces set in `mask` of word `wordPos` (a signed permit
    /// using one of them can no longer be spent).
    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    function _useUnorderedNonce(address from, uint256 nonce) private {
        uint256 wordPos = nonce >> 8;
        uint256 bit = 1 << (nonce & 0xff);
        uint256 word = nonceBitmap[from][wordPos];
        if (word & bit != 0) revert InvalidNonce();
        nonceBitmap[from][wordPos] = word | bit;
    }

    /// @dev Permit2's SignatureVerification: an EOA signs 65 bytes (r, s, v) or 64 (EIP-2098
    /// r, vs); a contract owner answers ERC-1271.
    function _checkSignature(bytes calldata signature, bytes32 digest, address claimedSigner) private view {
        if (claimedSigner.code.length == 0) {
            bytes32 r;
            bytes32 s;
            uint8 v;
            if (signature.length == 65) {
                r = bytes32(signature[0:32]);
                s = bytes32(signature[32:64]);
                v = uint8(signature[64]);
            } else if (signature.length == 64) {
                r = bytes32(signature[0:32]);
                bytes32 vs = bytes32(signature[32:64]);
                s = vs & bytes32(0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff);
                v = uint8(uint256(vs >> 255)) + 27;
            } else {
                revert InvalidSignatureLength();
            }
            address signer = ecrecover(digest, v, r, s);
            if (signer == address(0)) revert InvalidSignature();
            if (signer != claimedSigner) revert InvalidSigner();
        } else {
            (bool ok, bytes memory ret) =
                claimedSigner.staticcall(abi.encodeWithSelector(ERC1271_MAGIC_VALUE, digest, signature));
            if (!ok || ret.length < 32 || bytes4(abi.decode(ret, (bytes32))) != ERC1271_MAGIC_VALUE) {
                revert InvalidContractSignature();
            }
        }
    }

    /// @dev The token's own revert (e.g. "ERC20: transfer amount exceeds allowance") is passed on;
    /// a token answering `false` is a TransferFromFailed.
    function _transferFrom(address token, address from, address to, uint256 amount) private {
        (bool ok, bytes memory ret) = token.call(abi.encodeWithSelector(0x23b872dd, from, to, amount));
        if (!ok) {
            assembly {
                revert(add(ret, 0x20), mload(ret))
            }
        }
        if (ret.length != 0 && !abi.decode(ret, (bool))) revert TransferFromFailed();
        if (token.code.length == 0) revert TransferFromFailed();
    }
}
